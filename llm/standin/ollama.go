package standin

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

type olInMessage struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	Thinking  string `json:"thinking"`
	ToolCalls []any  `json:"tool_calls"`
}

// serveOllama plays Ollama's native /api/chat: one JSON object per line,
// thinking in message.thinking, whole tool calls with object arguments,
// and a last line with done:true and the counts.
func (s *Server) serveOllama(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Model    string          `json:"model"`
		Messages []olInMessage   `json:"messages"`
		Stream   *bool           `json:"stream"`
		Think    json.RawMessage `json:"think"`
		Options  map[string]any  `json:"options"`
	}
	fail := func(status int, msg string) { errorString(w, status, msg) }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	if in.Stream != nil && !*in.Stream {
		fail(http.StatusBadRequest, "the stand-in streams only")
		return
	}
	// Thinking is on by default since Ollama 0.12.4.
	thinking := string(in.Think) != "false"
	role := func(m olInMessage) string { return m.Role }
	content := func(m olInMessage) string { return m.Content }
	question, toolResult, round := lastUserAndRound(in.Messages, role, content, func(m olInMessage) bool { return len(m.ToolCalls) > 0 })
	maxTokens, _ := in.Options["num_predict"].(float64)
	ti := turnInput{model: in.Model, question: question, toolResult: toolResult, round: round,
		thinkingOn: thinking, softNoThink: thinking && softNoThink(in.Messages, role, content), maxTokens: int(maxTokens)}
	if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == "assistant" {
		last := in.Messages[n-1]
		// Ollama continues a final assistant message; its template writes
		// the message's thinking as a closed <think> block when think is
		// set. A thinking-only prefill has its continuation parsed as
		// thinking (ollama/ollama#17187).
		thinkingOnly := last.Content == "" && last.Thinking != "" && string(in.Think) != ""
		ti.continued = strings.Contains(last.Content, "</think>") || thinkingOnly
		ti.answerAsReasoning = thinkingOnly && thinking
	}
	pc := newPacer(w, r, s.pacing)
	pl := s.plan(ti, func() string { return "call_" + strings.ToLower(alnum(pc.rng, 8)) })
	pc.pacing = pl.pacing
	if f := pl.fault; f != nil && f.Kind == "html" {
		badGateway(w)
		return
	}
	if f := pl.fault; f != nil && f.Kind == "http" {
		fail(max(f.Status, 400), orDefault(f.Message, "model runner has unexpectedly stopped"))
		return
	}

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	start := time.Now()
	line := func(msg obj, extra ...kv) error {
		o := obj{{"model", in.Model}, {"created_at", time.Now().UTC().Format(time.RFC3339Nano)}, {"message", msg}, {"done", false}}
		b, _ := json.Marshal(append(o, extra...))
		return pc.write(append(b, '\n'))
	}
	fault := pl.fault
	generated := 0
	doneReason := "stop"
	emit := func(field, text string) bool {
		for _, t := range tokenize(text) {
			if pl.maxTokens > 0 && generated >= pl.maxTokens {
				doneReason = "length"
				return false
			}
			if pc.faultDue(fault) {
				switch fault.Kind {
				case "error":
					b, _ := json.Marshal(obj{{"error", orDefault(fault.Message, "model runner has unexpectedly stopped")}})
					_ = pc.write(append(b, '\n'))
					return false
				case "cut":
					_ = cut(w)
					return false
				case "no-finish":
					return false
				case "stall":
					_ = sleep(pc.ctx, time.Duration(fault.StallMs)*time.Millisecond)
				}
				fault = nil
			}
			if pc.token() != nil {
				return false
			}
			generated++
			msg := obj{{"role", "assistant"}, {"content", ""}}
			if field == "thinking" {
				msg = append(msg, kv{"thinking", t})
			} else {
				msg[1].v = t
			}
			if line(msg) != nil {
				return false
			}
		}
		return true
	}
	// Ollama's parser trims the whitespace around thinking and answer.
	if pl.thinks && !emit("thinking", strings.TrimSpace(pl.reasoning)) && doneReason != "length" {
		return
	}
	answerField := "content"
	if pl.answerAsReasoning {
		answerField = "thinking"
	}
	if doneReason != "length" && !emit(answerField, strings.TrimSpace(pl.answer)) && doneReason != "length" {
		return
	}
	if doneReason != "length" && len(pl.calls) > 0 {
		if pc.token() != nil {
			return
		}
		var calls []obj
		for i, c := range pl.calls {
			var args any
			_ = json.Unmarshal([]byte(c.args), &args)
			calls = append(calls, obj{{"id", c.id}, {"function", obj{{"index", i}, {"name", c.name}, {"arguments", args}}}})
		}
		if line(obj{{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}) != nil {
			return
		}
	}
	elapsed := time.Since(start).Nanoseconds()
	final := obj{{"model", in.Model}, {"created_at", time.Now().UTC().Format(time.RFC3339Nano)},
		{"message", obj{{"role", "assistant"}, {"content", ""}}}, {"done", true}, {"done_reason", doneReason},
		{"total_duration", elapsed}, {"load_duration", 1200000}, {"prompt_eval_count", len(question)/4 + 20},
		{"prompt_eval_duration", 3000000}, {"eval_count", generated}, {"eval_duration", elapsed}}
	b, _ := json.Marshal(final)
	_ = pc.write(append(b, '\n'))
}
