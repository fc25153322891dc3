// Package standin is a local HTTP server that plays a Qwen3 model behind
// the serving backends Alicia supports, because no real model runs on
// development and test machines. Each backend's endpoint answers in that
// backend's exact streaming format, quirks included (field names, where
// finish_reason rides, usage chunks, [DONE], tool-call fragments, keep-alive
// comments, error shapes), with realistic pacing. What the model says comes
// from scenarios.
//
// Profiles are chosen by the URL path, so that a client configured with a
// base URL cannot tell the stand-in from the real server:
//
//	/v1/chat/completions, /vllm/v1/…   vLLM with the qwen3 reasoning parser (field "reasoning")
//	/vllm-both/v1/…                    vLLM 0.11–0.16 ("reasoning" and "reasoning_content")
//	/vllm-legacy/v1/…                  vLLM ≤ 0.10 ("reasoning_content", flat error objects)
//	/vllm-noparser/v1/…                vLLM without a reasoning parser (inline <think> tags)
//	/vllm-mtp/v1/…                     the same with speculative decoding: chunks cut anywhere, tags split
//	/sglang/v1/…, /sglang-0.4/v1/…     SGLang (0.4 serialises every null key)
//	/llamacpp/v1/…                     llama.cpp llama-server
//	/llamacpp-legacy/v1/…              llama.cpp before #16109 (errors in an "error:" SSE field)
//	/llamacpp-none/v1/…                llama.cpp with --reasoning-format none (inline tags)
//	/ollama/v1/…, /ollama-0.32.5/v1/…  Ollama's OpenAI-compatible API
//	/dashscope/v1/…                    DashScope compatible mode
//	/openrouter/v1/…                   OpenRouter
//	/api/chat, /ollama/api/chat        Ollama's native API (NDJSON)
//	/agui, /agui-chunks/agui, /agui-thinking/agui
//	                                   an AG-UI agent (1.0 events; *_CHUNK events; deprecated THINKING_*)
//
// The model variant follows the requested model name as with real Qwen3
// weights: "…Instruct…" never thinks, "…Thinking…" and Qwen3.5 always
// think and open <think> in the prompt, any other name is a 2504 hybrid
// that thinks unless told not to (and writes an empty think block for
// /no_think). Serve names an alias for some weights, as vLLM's
// --served-model-name or an Ollama tag do; each profile then says what it
// serves in its own model-information format (GET …/v1/models, llama.cpp's
// GET …/props, Ollama's POST …/api/show).
//
// A request that ends with an assistant message is treated as each server
// treats it: vLLM continues it only with continue_final_message and
// add_generation_prompt false (and refuses the first without the second),
// SGLang only with continue_final_message (else the message becomes a
// user message), llama.cpp always but refuses it with thinking on, Ollama
// always. When the continued message closed the reasoning with </think>,
// the model writes its answer only, filed as reasoning where the server
// does so (vLLM's parser when thinking was not switched off, Ollama's for
// a thinking-only message). A scenario's reasonForMs makes the model
// think for long, for reasoning budgets to be tried on; Recorded hears
// every request's body.
package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// Server is the stand-in.
type Server struct {
	// aliases maps a served model name to the weights it stands for; set
	// before Handler serves.
	aliases   map[string]string
	scenarios []Scenario
	pacing    Pacing
	log       *slog.Logger
	// Flushed, set before Handler serves, hears each delta of an
	// OpenAI-dialect stream once it has been flushed to the client: its
	// request, kind ("reasoning" or "content") and text. A benchmark
	// measures the client's delays from these moments.
	Flushed func(r *http.Request, kind, text string)
	// Recorded, set before Handler serves, hears the body of every POST
	// before it is answered, so that a test can assert the exact shape of
	// what a client sent (a continuation, a thinking switch).
	Recorded func(r *http.Request, body []byte)
}

// New builds a stand-in from scenarios, tried in order, with the default
// scenario last. pacing applies where a scenario sets none.
func New(scenarios []Scenario, pacing Pacing, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	all := append(append([]Scenario(nil), scenarios...), DefaultScenario())
	for i := range all {
		if err := all[i].compile(); err != nil {
			return nil, err
		}
	}
	return &Server{scenarios: all, pacing: pacing, log: log, aliases: map[string]string{}}, nil
}

// Serve makes the stand-in answer requests for alias as the weights
// named by weights (a Hugging Face name or a path) would. Call it before
// Handler.
func (s *Server) Serve(alias, weights string) {
	s.aliases[alias] = weights
}

// weights is the model a requested name stands for.
func (s *Server) weights(name string) string {
	if w, ok := s.aliases[name]; ok {
		return w
	}
	return name
}

// Handler serves every profile.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		s.serveOpenAI(w, r, openAIProfiles["vllm"])
	})
	mux.HandleFunc("POST /{profile}/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		p, ok := openAIProfiles[r.PathValue("profile")]
		if !ok {
			http.Error(w, "unknown profile", http.StatusNotFound)
			return
		}
		s.serveOpenAI(w, r, p)
	})
	s.modelInfo(mux)
	mux.HandleFunc("POST /api/chat", s.serveOllama)
	mux.HandleFunc("POST /ollama/api/chat", s.serveOllama)
	mux.HandleFunc("POST /agui", func(w http.ResponseWriter, r *http.Request) { s.serveAGUI(w, r, "agui") })
	mux.HandleFunc("POST /{profile}/agui", func(w http.ResponseWriter, r *http.Request) {
		s.serveAGUI(w, r, r.PathValue("profile"))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "Alicia's Qwen3 stand-in: not a real model. Profiles: see the package documentation of llm/standin.")
	})
	if s.Recorded == nil {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
				return
			}
			s.Recorded(r, body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		mux.ServeHTTP(w, r)
	})
}

// turnInput is what every backend's request comes down to.
type turnInput struct {
	model      string
	question   string
	toolResult string
	// round counts the tool rounds since the last user message.
	round        int
	thinkingOn   bool
	softNoThink  bool
	maxTokens    int
	includeUsage bool
	// continued: the request continues a final assistant message that
	// closed the model's reasoning with </think>, so the model writes its
	// answer only.
	continued bool
	// answerAsReasoning: the server's parser files that answer as
	// reasoning (a quirk some servers have for continuations).
	answerAsReasoning bool
}

// plan is the model's output for one response.
type plan struct {
	scenario   *Scenario
	thinks     bool
	openInTmpl bool // no opening <think> in the output
	reasoning  string
	answer     string
	calls      []plannedCall
	fault      *Fault
	encrypted  string
	pacing     Pacing
	maxTokens  int
	// answerAsReasoning: the answer goes out in the reasoning field.
	answerAsReasoning bool
}

type plannedCall struct {
	id        string
	name      string
	args      string // JSON re-serialised with ": " spacing, as vLLM does
	encrypted string
}

func (s *Server) plan(in turnInput, callID func() string) *plan {
	sc := &s.scenarios[len(s.scenarios)-1]
	for i := range s.scenarios {
		if s.scenarios[i].matches(in.question) {
			sc = &s.scenarios[i]
			break
		}
	}
	rd := sc.Rounds[min(in.round, len(sc.Rounds)-1)]
	model := strings.ToLower(s.weights(in.model))
	instruct := strings.Contains(model, "instruct")
	alwaysThinks := strings.Contains(model, "thinking") || strings.Contains(model, "qwen3.5")
	p := &plan{
		scenario:   sc,
		openInTmpl: alwaysThinks,
		// A continuation's prompt closed the thinking: the model answers.
		thinks:            !instruct && (alwaysThinks || in.thinkingOn) && !in.continued,
		fault:             rd.Fault,
		encrypted:         rd.Encrypted,
		pacing:            s.pacing,
		maxTokens:         in.maxTokens,
		answerAsReasoning: in.continued && in.answerAsReasoning,
	}
	if sc.Pacing != nil {
		p.pacing = *sc.Pacing
	}
	fill := strings.NewReplacer("{{question}}", in.question, "{{toolResult}}", in.toolResult)
	if p.thinks && !(in.softNoThink && !alwaysThinks) {
		paras := make([]string, len(rd.Reasoning))
		for i, para := range rd.Reasoning {
			paras[i] = fill.Replace(para)
		}
		paras = append(paras, pondering(rd.ReasonForMs, p.pacing)...)
		p.reasoning = strings.Join(paras, "\n\n")
	}
	p.answer = fill.Replace(rd.Answer)
	for _, c := range rd.ToolCalls {
		p.calls = append(p.calls, plannedCall{id: callID(), name: c.Name, args: spacedJSON(c.Arguments), encrypted: c.Encrypted})
	}
	s.log.Debug("stand-in response", "scenario", sc.Name, "round", in.round, "thinks", p.thinks, "calls", len(p.calls))
	return p
}

// pondering is the reasoning a model on a hard question goes on with:
// enough paragraphs to last about ms at the pacing's time per token.
func pondering(ms int, p Pacing) []string {
	if ms <= 0 {
		return nil
	}
	sentences := []string{
		"Wait, let me look at this from another side before I commit to an answer.",
		"Maybe I missed a case, so I should go through the possibilities again.",
		"If the first reading holds, the answer follows; but the second reading changes it.",
		"I should double-check the details, because a wrong answer would be worse than a slow one.",
	}
	want := ms / max(int(p.TokenMs), 1)
	var paras []string
	for n, i := 0, 0; n < want; i++ {
		para := sentences[i%len(sentences)] + " " + sentences[(i+1)%len(sentences)]
		n += len(tokenize(para)) + 1
		paras = append(paras, para)
	}
	return paras
}

// spacedJSON writes arguments as vLLM re-serialises them: ", " and ": ".
func spacedJSON(v map[string]any) string {
	if v == nil {
		return "{}"
	}
	b, _ := json.Marshal(v)
	var out strings.Builder
	inString, escaped := false, false
	for _, c := range string(b) {
		out.WriteRune(c)
		switch {
		case escaped:
			escaped = false
		case c == '\\' && inString:
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ':' || c == ','):
			out.WriteByte(' ')
		}
	}
	return out.String()
}

// pacer writes frames at the plan's pace and knows when the fault is due.
type pacer struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	ctx    context.Context
	pacing Pacing
	rng    *rand.Rand
	first  bool
	tokens int
	// ping is sent while the first token is awaited for longer than a
	// second (llama.cpp's keep-alive).
	ping []byte
	// buf holds the frame being written: one per stream, reused, because
	// at hundreds of streams a fresh buffer per token was most of the
	// stand-in's garbage.
	buf []byte
}

func newPacer(w http.ResponseWriter, r *http.Request, p Pacing) *pacer {
	return &pacer{w: w, rc: http.NewResponseController(w), ctx: r.Context(), pacing: p,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), first: true}
}

func (p *pacer) write(b []byte) error {
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	return p.rc.Flush()
}

// writeSSE writes v as one Server-Sent Events data frame.
func (p *pacer) writeSSE(v any) error {
	p.buf = appendSSE(p.buf[:0], v)
	return p.write(p.buf)
}

// token waits for the next token: the time to first token, then the time
// per token.
func (p *pacer) token() error {
	ms := p.pacing.TokenMs
	if p.first {
		ms, p.first = p.pacing.TTFTMs, false
	}
	p.tokens++
	if ms <= 0 {
		return p.ctx.Err()
	}
	d := time.Duration(ms * (1 + p.pacing.Jitter*(2*p.rng.Float64()-1)) * float64(time.Millisecond))
	for d > 0 {
		step := d
		if p.ping != nil && step > time.Second {
			step = time.Second
		}
		if err := sleep(p.ctx, step); err != nil {
			return err
		}
		d -= step
		if d > 0 && p.ping != nil {
			if err := p.write(p.ping); err != nil {
				return err
			}
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// faultDue reports whether f strikes before the next token.
func (p *pacer) faultDue(f *Fault) bool {
	return f != nil && p.tokens >= f.AfterTokens
}

var errCut = errors.New("stand-in: connection cut by a fault")

// cut ends the response abruptly, as a crashed server or proxy would.
func cut(w http.ResponseWriter) error {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
		}
	}
	return errCut
}

// lastUserAndRound finds the last user message, the latest tool result
// after it, and how many assistant tool-call rounds followed it.
func lastUserAndRound[M any](msgs []M, role func(M) string, content func(M) string, hasCalls func(M) bool) (question, toolResult string, round int) {
	last := -1
	for i, m := range msgs {
		if role(m) == "user" {
			last = i
		}
	}
	if last >= 0 {
		question = content(msgs[last])
	}
	for _, m := range msgs[last+1:] {
		switch {
		case role(m) == "assistant" && hasCalls(m):
			round++
		case role(m) == "tool":
			toolResult = content(m)
		}
	}
	return question, toolResult, round
}

// softNoThink applies Qwen3's soft switch: the latest /think or /no_think
// in a user or system message wins.
func softNoThink[M any](msgs []M, role func(M) string, content func(M) string) bool {
	off := false
	for _, m := range msgs {
		if r := role(m); r != "user" && r != "system" {
			continue
		}
		c := content(m)
		if i, j := strings.LastIndex(c, "/no_think"), strings.LastIndex(c, "/think"); i >= 0 || j >= 0 {
			off = i > j
		}
	}
	return off
}

// textOf reads a message content that is a string or an array of parts.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

// errorString answers {"error": "…"}, the shape of Ollama's native API and
// of many AG-UI servers.
func errorString(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(obj{{"error", msg}})
	_, _ = w.Write(b)
}
