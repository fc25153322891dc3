package standin

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// obj is a JSON object that keeps its key order, because backends differ
// in it (llama.cpp puts choices first, DashScope puts id last).
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) { return o.appendJSON(nil) }

// appendJSON writes what encoding/json would, byte for byte, without its
// reflection for the shapes every token's chunk is made of: a bench at
// hundreds of streams spends most of its stand-in's CPU there otherwise.
func (o obj) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	for i, e := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, e.k)
		b = append(b, ':')
		var err error
		if b, err = appendJSONValue(b, e.v); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendJSONString(b, v), nil
	case *string:
		if v == nil {
			return append(b, "null"...), nil
		}
		return appendJSONString(b, *v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case obj:
		return v.appendJSON(b)
	case []obj:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = e.appendJSON(b); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	j, err := json.Marshal(v)
	return append(b, j...), err
}

// appendJSONString quotes plain ASCII itself and leaves every string that
// needs escaping to encoding/json, so that the escapes stay its own.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s)
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// openAIProfile is one server's OpenAI-compatible dialect.
type openAIProfile struct {
	name string
	// parser: the server separates reasoning; false puts raw <think> tags
	// in content.
	parser bool
	// delta builds a delta for "reasoning" or "content" text.
	delta func(kind, text string) obj
	// first is the delta of the first chunk.
	first obj
	// finishDelta and finishExtra shape the finish chunk.
	finishDelta obj
	finishExtra obj
	// wholeTools: each tool call in one delta (Ollama).
	wholeTools bool
	toolID     func(r *rand.Rand) string
	chunkID    func(r *rand.Rand) string
	// strip: the server trims whitespace around reasoning and answer.
	strip bool
	// phrase: tokens per chunk (DashScope streams phrases).
	phrase int
	// rechunk: content arrives in pieces cut at arbitrary bytes, as with
	// speculative (MTP) decoding or a re-buffering proxy, so that tags
	// split across chunks ("\n</think" then ">Hello").
	rechunk bool
	// wrap builds the chunk around id, created, model and choices.
	wrap func(id string, created int64, model string, choices any) obj
	// comment is sent before the first token (OpenRouter).
	comment string
	// ping is sent every second of a long prefill (llama.cpp).
	ping bool
	// streamError writes a mid-stream error; its result says whether
	// [DONE] follows.
	streamError func(p *pacer, wrap func(choices any) obj, msg string) (done bool)
	// httpError is the body of an error answered before the stream.
	httpError func(status int, msg string) (contentType string, body []byte)
	// usage builds the usage chunk's extra keys and choices.
	usageChoices func(finish string) any
	usageExtra   obj
}

func str(s string) *string { return &s }

func hexID(r *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[r.IntN(16)]
	}
	return string(b)
}

func alnum(r *rand.Rand, n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

func standardWrap(id string, created int64, model string, choices any) obj {
	return obj{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}, {"choices", choices}}
}

func nestedError(typ string, code any) func(int, string) (string, []byte) {
	return func(status int, msg string) (string, []byte) {
		c := code
		if c == nil {
			c = status
		}
		b, _ := json.Marshal(obj{{"error", obj{{"message", msg}, {"type", typ}, {"param", nil}, {"code", c}}}})
		return "application/json", b
	}
}

func flatError(status int, msg string) (string, []byte) {
	b, _ := json.Marshal(obj{{"object", "error"}, {"message", msg}, {"type", "BadRequestError"}, {"param", nil}, {"code", status}})
	return "application/json", b
}

func sseFrame(v any) []byte { return appendSSE(nil, v) }

// appendSSE appends v as one Server-Sent Events data frame.
func appendSSE(dst []byte, v any) []byte {
	dst, _ = appendJSONValue(append(dst, "data: "...), v)
	return append(dst, '\n', '\n')
}

// dataErrorThen writes data: {"error":{…}} and says whether [DONE] follows.
func dataErrorThen(inner func(msg string) obj, done bool) func(*pacer, func(any) obj, string) bool {
	return func(p *pacer, _ func(any) obj, msg string) bool {
		_ = p.writeSSE(obj{{"error", inner(msg)}})
		return done
	}
}

var openAIProfiles = map[string]*openAIProfile{}

func init() {
	vllmID := func(r *rand.Rand) string { return "chatcmpl-" + hexID(r, 32) }
	vllmInner := func(msg string) obj {
		return obj{{"message", msg}, {"type", "BadRequestError"}, {"param", nil}, {"code", 400}}
	}
	vllm := func(name string, reasoningKeys []string, contentNulls []string) *openAIProfile {
		return &openAIProfile{
			name:   name,
			parser: len(reasoningKeys) > 0,
			delta: func(kind, text string) obj {
				if kind == "reasoning" {
					d := obj{}
					for _, k := range reasoningKeys {
						d = append(d, kv{k, text})
					}
					return d
				}
				d := obj{{"content", text}}
				for _, k := range contentNulls {
					d = append(d, kv{k, nil})
				}
				return d
			},
			first:       obj{{"role", "assistant"}, {"content", ""}},
			finishDelta: obj{{"content", ""}},
			finishExtra: obj{{"stop_reason", nil}},
			toolID:      func(r *rand.Rand) string { return "chatcmpl-tool-" + hexID(r, 32) },
			chunkID:     vllmID,
			wrap:        standardWrap,
			streamError: dataErrorThen(vllmInner, true),
			httpError:   nestedError("BadRequestError", nil),
		}
	}
	openAIProfiles["vllm"] = vllm("vllm", []string{"reasoning"}, nil)
	openAIProfiles["vllm-both"] = vllm("vllm-both", []string{"reasoning", "reasoning_content"}, []string{"reasoning_content"})
	legacy := vllm("vllm-legacy", []string{"reasoning_content"}, nil)
	legacy.streamError = func(p *pacer, _ func(any) obj, msg string) bool {
		_ = p.writeSSE(obj{{"object", "error"}, {"message", msg}, {"type", "BadRequestError"}, {"param", nil}, {"code", 400}})
		return true
	}
	legacy.httpError = flatError
	openAIProfiles["vllm-legacy"] = legacy
	openAIProfiles["vllm-noparser"] = vllm("vllm-noparser", nil, nil)
	mtp := vllm("vllm-mtp", nil, nil)
	mtp.rechunk = true
	openAIProfiles["vllm-mtp"] = mtp

	sglang := func(name string, nullKeys bool) *openAIProfile {
		return &openAIProfile{
			name:   name,
			parser: true,
			delta: func(kind, text string) obj {
				if nullKeys {
					d := obj{{"role", nil}, {"content", nil}, {"reasoning_content", nil}, {"tool_calls", nil}}
					if kind == "reasoning" {
						d[2].v = text
					} else {
						d[1].v = text
					}
					return d
				}
				if kind == "reasoning" {
					return obj{{"reasoning_content", text}}
				}
				return obj{{"content", text}}
			},
			first:       obj{{"role", "assistant"}, {"content", ""}},
			finishDelta: obj{},
			finishExtra: obj{{"matched_stop", 151645}},
			toolID:      func(r *rand.Rand) string { return "call_" + hexID(r, 24) },
			chunkID: func(r *rand.Rand) string {
				return "chatcmpl-" + hexID(r, 8) + "-" + hexID(r, 4) + "-" + hexID(r, 4) + "-" + hexID(r, 4) + "-" + hexID(r, 12)
			},
			wrap: func(id string, created int64, model string, choices any) obj {
				o := standardWrap(id, created, model, choices)
				if nullKeys {
					o = append(o, kv{"usage", nil})
				}
				return o
			},
			streamError: dataErrorThen(func(msg string) obj {
				return obj{{"message", msg}, {"type", "BadRequestError"}, {"code", 400}}
			}, false),
			httpError: flatError,
		}
	}
	openAIProfiles["sglang"] = sglang("sglang", false)
	openAIProfiles["sglang-0.4"] = sglang("sglang-0.4", true)

	llamacpp := func(name string, legacyErrors bool) *openAIProfile {
		p := &openAIProfile{
			name:   name,
			parser: true,
			delta: func(kind, text string) obj {
				if kind == "reasoning" {
					return obj{{"reasoning_content", text}}
				}
				return obj{{"content", text}}
			},
			first:       obj{{"role", "assistant"}, {"content", nil}},
			finishDelta: obj{},
			toolID:      func(r *rand.Rand) string { return alnum(r, 32) },
			chunkID:     func(r *rand.Rand) string { return "chatcmpl-" + alnum(r, 32) },
			ping:        true,
			wrap: func(id string, created int64, model string, choices any) obj {
				return obj{{"choices", choices}, {"created", created}, {"id", id}, {"model", model}, {"system_fingerprint", "b9500-abc1234"}, {"object", "chat.completion.chunk"}}
			},
			streamError: dataErrorThen(func(msg string) obj {
				return obj{{"code", 500}, {"message", msg}, {"type", "server_error"}}
			}, false),
			httpError: func(status int, msg string) (string, []byte) {
				b, _ := json.Marshal(obj{{"error", obj{{"code", status}, {"message", msg}, {"type", "invalid_request_error"}}}})
				return "application/json", b
			},
			usageExtra: obj{{"timings", obj{{"prompt_n", 12}, {"prompt_ms", 30.5}, {"predicted_n", 100}, {"predicted_per_second", 92.4}}}},
		}
		if legacyErrors {
			// Before llama.cpp#16109: a non-standard SSE field.
			p.streamError = func(pc *pacer, _ func(any) obj, msg string) bool {
				b, _ := json.Marshal(obj{{"code", 500}, {"message", msg}, {"type", "server_error"}})
				_ = pc.write(append(append([]byte("error: "), b...), '\n', '\n'))
				return false
			}
		}
		return p
	}
	openAIProfiles["llamacpp"] = llamacpp("llamacpp", false)
	openAIProfiles["llamacpp-legacy"] = llamacpp("llamacpp-legacy", true)
	// --reasoning-format none: the model's tags stay in content.
	none := llamacpp("llamacpp-none", false)
	none.parser = false
	openAIProfiles["llamacpp-none"] = none

	ollama := func(name string, old bool) *openAIProfile {
		p := &openAIProfile{
			name:   name,
			parser: true,
			strip:  true,
			delta: func(kind, text string) obj {
				d := obj{}
				if old {
					d = append(d, kv{"role", "assistant"})
				}
				if kind == "reasoning" {
					if old {
						d = append(d, kv{"content", ""})
					}
					return append(d, kv{"reasoning", text})
				}
				return append(d, kv{"content", text})
			},
			first:       obj{{"role", "assistant"}, {"content", ""}},
			finishDelta: obj{},
			wholeTools:  true,
			toolID:      func(r *rand.Rand) string { return "call_" + strings.ToLower(alnum(r, 8)) },
			chunkID:     func(r *rand.Rand) string { return fmt.Sprintf("chatcmpl-%d", r.IntN(999)) },
			wrap: func(id string, created int64, model string, choices any) obj {
				return append(standardWrap(id, created, model, choices), kv{"system_fingerprint", "fp_ollama"})
			},
			streamError: dataErrorThen(func(msg string) obj {
				return obj{{"message", msg}, {"type", "api_error"}, {"param", nil}, {"code", nil}}
			}, false),
			httpError: func(status int, msg string) (string, []byte) {
				typ := "invalid_request_error"
				if status == 404 {
					typ = "not_found_error"
				} else if status >= 500 {
					typ = "api_error"
				}
				b, _ := json.Marshal(obj{{"error", obj{{"message", msg}, {"type", typ}, {"param", nil}, {"code", nil}}}})
				return "application/json", b
			},
		}
		if old {
			p.finishDelta = obj{{"role", "assistant"}, {"content", ""}}
		}
		return p
	}
	openAIProfiles["ollama"] = ollama("ollama", false)
	openAIProfiles["ollama-0.32.5"] = ollama("ollama-0.32.5", true)

	openAIProfiles["dashscope"] = &openAIProfile{
		name:   "dashscope",
		parser: true,
		phrase: 4,
		delta: func(kind, text string) obj {
			if kind == "reasoning" {
				return obj{{"content", nil}, {"reasoning_content", text}}
			}
			return obj{{"content", text}, {"reasoning_content", nil}}
		},
		first:       obj{{"content", nil}, {"role", "assistant"}, {"reasoning_content", ""}},
		finishDelta: obj{{"content", ""}, {"reasoning_content", nil}},
		toolID:      func(r *rand.Rand) string { return "call_" + hexID(r, 24) },
		chunkID: func(r *rand.Rand) string {
			return "chatcmpl-" + hexID(r, 8) + "-" + hexID(r, 4) + "-" + hexID(r, 4) + "-" + hexID(r, 4) + "-" + hexID(r, 12)
		},
		wrap: func(id string, created int64, model string, choices any) obj {
			return obj{{"choices", choices}, {"object", "chat.completion.chunk"}, {"usage", nil}, {"created", created}, {"system_fingerprint", nil}, {"model", model}, {"id", id}}
		},
		streamError: dataErrorThen(func(msg string) obj {
			return obj{{"code", "internal_error"}, {"param", nil}, {"message", msg}, {"type", "internal_error"}}
		}, false),
		httpError: func(status int, msg string) (string, []byte) {
			// Streaming requests get their 400 framed as SSE.
			return "text/event-stream", sseFrame(obj{
				{"error", obj{{"code", "invalid_parameter_error"}, {"param", nil}, {"message", "<400> InternalError.Algo.InvalidParameter: " + msg}, {"type", "invalid_request_error"}}},
				{"id", "chatcmpl-err"}, {"request_id", "req-standin"},
			})
		},
	}

	openAIProfiles["openrouter"] = &openAIProfile{
		name:   "openrouter",
		parser: true,
		delta: func(kind, text string) obj {
			if kind == "reasoning" {
				return obj{{"role", "assistant"}, {"content", ""}, {"reasoning", text},
					{"reasoning_details", []obj{{{"type", "reasoning.text"}, {"text", text}, {"format", "unknown"}, {"index", 0}}}}}
			}
			return obj{{"role", "assistant"}, {"content", text}, {"reasoning", nil}, {"reasoning_details", []any{}}}
		},
		first:       obj{{"role", "assistant"}, {"content", ""}},
		finishDelta: obj{{"role", "assistant"}, {"content", ""}},
		finishExtra: obj{{"native_finish_reason", "stop"}},
		toolID:      func(r *rand.Rand) string { return "call_" + alnum(r, 24) },
		chunkID:     func(r *rand.Rand) string { return "gen-" + fmt.Sprint(time.Now().Unix()) + "-" + alnum(r, 20) },
		comment:     ": OPENROUTER PROCESSING\n\n",
		wrap: func(id string, created int64, model string, choices any) obj {
			return append(standardWrap(id, created, model, choices), kv{"provider", "StandIn"})
		},
		streamError: func(p *pacer, wrap func(any) obj, msg string) bool {
			chunk := wrap([]obj{{{"index", 0}, {"delta", obj{{"content", ""}}}, {"finish_reason", "error"}, {"native_finish_reason", "error"}}})
			chunk = append(chunk, kv{"error", obj{{"code", "server_error"}, {"message", msg}}})
			_ = p.writeSSE(chunk)
			return false
		},
		httpError: func(status int, msg string) (string, []byte) {
			b, _ := json.Marshal(obj{{"error", obj{{"code", status}, {"message", msg}, {"metadata", obj{}}}}})
			return "application/json", b
		},
		usageChoices: func(finish string) any {
			return []obj{{{"index", 0}, {"delta", obj{{"role", "assistant"}, {"content", ""}}}, {"finish_reason", finish}}}
		},
		usageExtra: obj{{"cost", 0.0000123}, {"is_byok", false}},
	}
}

type oaInMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []any           `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oaIn struct {
	Model              string         `json:"model"`
	Stream             bool           `json:"stream"`
	Messages           []oaInMessage  `json:"messages"`
	MaxTokens          int            `json:"max_tokens"`
	MaxCompletion      int            `json:"max_completion_tokens"`
	StreamOptions      map[string]any `json:"stream_options"`
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
	EnableThinking     *bool          `json:"enable_thinking"`
	ReasoningEffort    string         `json:"reasoning_effort"`
	Reasoning          map[string]any `json:"reasoning"`
	// vLLM and SGLang continue a final assistant message only when asked.
	ContinueFinalMessage bool  `json:"continue_final_message"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
}

// thinkingSwitch reads the switch this server honours, and only that one.
func (p *openAIProfile) thinkingSwitch(in *oaIn) bool {
	switch p.name {
	case "dashscope":
		return in.EnableThinking == nil || *in.EnableThinking
	case "ollama", "ollama-0.32.5":
		if in.ReasoningEffort == "none" {
			return false
		}
		if e, _ := in.Reasoning["effort"].(string); e == "none" {
			return false
		}
		return true
	case "openrouter":
		if on, ok := in.Reasoning["enabled"].(bool); ok {
			return on
		}
		return true
	}
	if on, ok := in.ChatTemplateKwargs["enable_thinking"].(bool); ok {
		return on
	}
	return true // Qwen3's template defaults to thinking
}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, prof *openAIProfile) {
	var in oaIn
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeHTTPError(w, prof, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	if len(in.Messages) == 0 {
		writeHTTPError(w, prof, http.StatusBadRequest, "messages must not be empty")
		return
	}
	if !in.Stream {
		writeHTTPError(w, prof, http.StatusBadRequest, "the stand-in streams only: set stream to true")
		return
	}
	thinking := prof.thinkingSwitch(&in)
	model := strings.ToLower(s.weights(in.Model))
	if prof.name == "dashscope" && !thinking && strings.Contains(model, "thinking") {
		writeHTTPError(w, prof, http.StatusBadRequest, "The value of the enable_thinking parameter is restricted to True.")
		return
	}
	continued, status, msg := prof.continuation(&in, thinking)
	if status != 0 {
		writeHTTPError(w, prof, status, msg)
		return
	}
	role := func(m oaInMessage) string { return m.Role }
	content := func(m oaInMessage) string { return textOf(m.Content) }
	question, toolResult, round := lastUserAndRound(in.Messages, role, content, func(m oaInMessage) bool { return len(m.ToolCalls) > 0 })
	ti := turnInput{
		model: in.Model, question: question, toolResult: toolResult, round: round,
		thinkingOn: thinking, softNoThink: thinking && softNoThink(in.Messages, role, content),
		maxTokens: max(in.MaxTokens, in.MaxCompletion),
		continued: continued,
		// vLLM's newest qwen3 parser reads output as reasoning until
		// </think> unless told thinking is off (vllm#53284).
		answerAsReasoning: strings.HasPrefix(prof.name, "vllm") && prof.parser && thinking,
	}
	if on, ok := in.StreamOptions["include_usage"].(bool); ok {
		ti.includeUsage = on
	}
	pc := newPacer(w, r, s.pacing)
	pl := s.plan(ti, func() string { return prof.toolID(pc.rng) })
	pc.pacing = pl.pacing
	if f := pl.fault; f != nil && (f.Kind == "http" || f.Kind == "html") {
		if f.Kind == "html" {
			badGateway(w)
			return
		}
		writeHTTPError(w, prof, max(f.Status, 400), f.Message)
		return
	}
	flushed := func(string, string) {}
	if s.Flushed != nil {
		flushed = func(kind, text string) { s.Flushed(r, kind, text) }
	}
	s.streamOpenAI(w, pc, prof, pl, ti, len(question)/4+20, flushed)
}

// continuation applies the server's rules for a final assistant message,
// as each one has them: whether the model continues it (true only when it
// closed the reasoning: the model then answers), or an HTTP error to
// answer instead (status not 0). A final assistant message a server does
// not continue is a finished turn (vLLM) or becomes a user message
// (SGLang), as those servers do.
func (p *openAIProfile) continuation(in *oaIn, thinking bool) (continued bool, status int, msg string) {
	last := &in.Messages[len(in.Messages)-1]
	if last.Role != "assistant" {
		if in.ContinueFinalMessage && strings.HasPrefix(p.name, "vllm") {
			return false, http.StatusBadRequest, "continue_final_message is set but the final message is not an assistant message"
		}
		return false, 0, ""
	}
	closed := strings.Contains(textOf(last.Content), "</think>")
	switch {
	case strings.HasPrefix(p.name, "vllm"):
		if !in.ContinueFinalMessage {
			return false, 0, ""
		}
		// The request's validator refuses both set; left out,
		// add_generation_prompt defaults to true and the template refuses
		// the pair.
		if in.AddGenerationPrompt != nil && *in.AddGenerationPrompt {
			return false, http.StatusBadRequest, "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
		}
		if in.AddGenerationPrompt == nil {
			return false, http.StatusBadRequest, "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you want the model to continue the final message, and add_generation_prompt when you want to add a header that will prompt it to start a new assistant message instead."
		}
	case strings.HasPrefix(p.name, "sglang"):
		if !in.ContinueFinalMessage {
			last.Role = "user"
			return false, 0, ""
		}
	case strings.HasPrefix(p.name, "llamacpp"):
		if thinking {
			return false, http.StatusBadRequest, "Assistant response prefill is incompatible with enable_thinking."
		}
	case strings.HasPrefix(p.name, "ollama"):
	default:
		// DashScope's partial mode and OpenRouter's prefill depend on the
		// model; neither is modelled: a finished turn.
		return false, 0, ""
	}
	return closed, 0, ""
}

// badGateway is what a reverse proxy in front of a dead backend answers.
func badGateway(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprint(w, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
}

func writeHTTPError(w http.ResponseWriter, prof *openAIProfile, status int, msg string) {
	ct, body := prof.httpError(status, msg)
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// rawOutput is the model's raw text as tokens, each marked with what a
// server with a reasoning parser makes of it.
type rawToken struct {
	reasoning bool
	tag       bool // <think> or </think>: parsers emit nothing for it
	text      string
}

func rawOutput(pl *plan, prof *openAIProfile, softEmpty bool) []rawToken {
	var out []rawToken
	add := func(reasoning bool, text string) {
		for _, t := range tokenize(text) {
			out = append(out, rawToken{reasoning: reasoning, text: t})
		}
	}
	thought := pl.thinks && (pl.reasoning != "" || softEmpty)
	if thought {
		if !pl.openInTmpl {
			out = append(out, rawToken{reasoning: true, tag: true, text: "<think>"})
		}
		if prof.strip {
			add(true, strings.TrimSpace(pl.reasoning))
		} else if pl.reasoning == "" {
			add(true, "\n\n")
		} else {
			add(true, "\n"+pl.reasoning+"\n")
		}
		out = append(out, rawToken{reasoning: true, tag: true, text: "</think>"})
	}
	answer := pl.answer
	if thought && !prof.strip && (answer != "" || len(pl.calls) > 0) {
		// Qwen3 writes "\n\n" after </think>, before the answer or before
		// its tool calls (the whitespace delta vLLM forwards).
		answer = "\n\n" + answer
	}
	add(pl.answerAsReasoning, answer)
	return out
}

func (s *Server) streamOpenAI(w http.ResponseWriter, pc *pacer, prof *openAIProfile, pl *plan, ti turnInput, promptTokens int, flushed func(kind, text string)) {
	id := prof.chunkID(pc.rng)
	created := time.Now().Unix()
	wrap := func(choices any) obj { return prof.wrap(id, created, ti.model, choices) }
	choice := func(delta obj, finish *string, extra obj) []obj {
		c := obj{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}
		return []obj{append(c, extra...)}
	}
	send := func(delta obj) error { return pc.writeSSE(wrap(choice(delta, nil, nil))) }

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if prof.comment != "" {
		if pc.write([]byte(prof.comment)) != nil {
			return
		}
	}
	if prof.ping {
		pc.ping = []byte(":\n\n")
	}
	fault := pl.fault
	rawTools := fault != nil && fault.Kind == "raw-tool-call"
	tokens := rawOutput(pl, prof, ti.softNoThink)
	if rawTools {
		for _, c := range pl.calls {
			for _, t := range tokenize("<tool_call>\n{\"name\": \"" + c.name + "\", \"arguments\": " + c.args + "}\n</tool_call>") {
				tokens = append(tokens, rawToken{text: t})
			}
		}
	}
	if prof.rechunk {
		tokens = rechunk(tokens, pc.rng)
	}
	finish := "stop"
	if len(pl.calls) > 0 && !rawTools {
		finish = "tool_calls"
	}
	// The first token: the role chunk rides with it.
	if pc.token() != nil || send(prof.first) != nil {
		return
	}
	generated := 1
	strike := func() (stop bool) {
		if !pc.faultDue(fault) {
			return false
		}
		f := fault
		fault = nil
		switch f.Kind {
		case "error":
			if prof.streamError(pc, wrap, orDefault(f.Message, "the model crashed")) {
				_ = pc.write([]byte("data: [DONE]\n\n"))
			}
			return true
		case "cut":
			_ = cut(w)
			return true
		case "no-finish":
			return true // a clean end with no finish and no [DONE]
		case "stall":
			_ = sleep(pc.ctx, time.Duration(f.StallMs)*time.Millisecond)
		default:
			fault = f // applies at the end (no-done, raw-tool-call)
		}
		return false
	}
	var batch []rawToken
	flushBatch := func() error {
		if len(batch) == 0 {
			return nil
		}
		kind := "content"
		var text strings.Builder
		for _, t := range batch {
			text.WriteString(t.text)
		}
		if prof.parser && batch[0].reasoning {
			kind = "reasoning"
		}
		d := prof.delta(kind, text.String())
		if rawTools && kind == "content" && !batch[0].reasoning {
			d = append(d, kv{"tool_calls", []any{}})
		}
		batch = batch[:0]
		if err := send(d); err != nil {
			return err
		}
		flushed(kind, text.String())
		return nil
	}
	for _, t := range tokens {
		if pl.maxTokens > 0 && generated >= pl.maxTokens {
			finish = "length"
			break
		}
		if prof.parser && t.tag {
			continue // the parser swallows the tag token
		}
		if strike() {
			return
		}
		if err := pc.token(); err != nil {
			return
		}
		generated++
		if len(batch) > 0 && batch[0].reasoning != t.reasoning {
			if flushBatch() != nil {
				return
			}
		}
		batch = append(batch, t)
		if len(batch) >= max(prof.phrase, 1) {
			if flushBatch() != nil {
				return
			}
		}
	}
	if flushBatch() != nil {
		return
	}
	if finish != "length" && !rawTools {
		for i, c := range pl.calls {
			if strike() {
				return
			}
			if err := pc.token(); err != nil {
				return
			}
			if s.sendToolCall(pc, prof, send, i, c) != nil {
				return
			}
		}
	}
	if strike() {
		return
	}
	extra := prof.finishExtra
	if prof.name == "openrouter" {
		extra = obj{{"native_finish_reason", finish}}
	}
	if pc.writeSSE(wrap(choice(prof.finishDelta, str(finish), extra))) != nil {
		return
	}
	if ti.includeUsage {
		choices := any([]any{})
		if prof.usageChoices != nil {
			choices = prof.usageChoices(finish)
		}
		usage := obj{{"prompt_tokens", promptTokens}, {"completion_tokens", generated}, {"total_tokens", promptTokens + generated}}
		u := append(wrap(choices), kv{"usage", usage})
		u = append(u, prof.usageExtra...)
		if pc.writeSSE(u) != nil {
			return
		}
	}
	if fault != nil && fault.Kind == "no-done" {
		return
	}
	_ = pc.write([]byte("data: [DONE]\n\n"))
}

// rechunk re-cuts raw output at random byte offsets (on rune boundaries).
func rechunk(tokens []rawToken, rng *rand.Rand) []rawToken {
	var all strings.Builder
	for _, t := range tokens {
		all.WriteString(t.text)
	}
	s := all.String()
	var out []rawToken
	for len(s) > 0 {
		n := min(len(s), 1+rng.IntN(12))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, rawToken{text: s[:n]})
		s = s[n:]
	}
	return out
}

// sendToolCall streams one call: whole (Ollama) or as a name chunk and
// argument fragments (vLLM, SGLang, llama.cpp, DashScope, OpenRouter).
func (s *Server) sendToolCall(pc *pacer, prof *openAIProfile, send func(obj) error, i int, c plannedCall) error {
	if prof.wholeTools {
		return send(obj{{"tool_calls", []obj{{{"id", c.id}, {"index", i}, {"type", "function"},
			{"function", obj{{"name", c.name}, {"arguments", c.args}}}}}}})
	}
	if err := send(obj{{"tool_calls", []obj{{{"index", i}, {"type", "function"}, {"id", c.id},
		{"function", obj{{"name", c.name}}}}}}}); err != nil {
		return err
	}
	frags := tokenize(c.args)
	for len(frags) > 0 {
		n := min(len(frags), 3)
		if err := pc.token(); err != nil {
			return err
		}
		if err := send(obj{{"tool_calls", []obj{{{"index", i}, {"function", obj{{"arguments", strings.Join(frags[:n], "")}}}}}}}); err != nil {
			return err
		}
		frags = frags[n:]
	}
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
