package standin

import (
	"encoding/json"
	"net/http"
	"time"

	gonanoid "github.com/matoous/go-nanoid/v2"
)

type aguiInMessage struct {
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []any           `json:"toolCalls"`
}

// serveAGUI plays a Qwen3 agent served through AG-UI. Profile "agui"
// streams 1.0 events, "agui-chunks" the *_CHUNK spellings, and
// "agui-thinking" the deprecated THINKING_* events.
func (s *Server) serveAGUI(w http.ResponseWriter, r *http.Request, profile string) {
	if profile != "agui" && profile != "agui-chunks" && profile != "agui-thinking" {
		http.Error(w, "unknown profile", http.StatusNotFound)
		return
	}
	var in struct {
		ThreadID       string          `json:"threadId"`
		RunID          string          `json:"runId"`
		Messages       []aguiInMessage `json:"messages"`
		ForwardedProps map[string]any  `json:"forwardedProps"`
	}
	fail := func(status int, msg string) { errorString(w, status, msg) }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(http.StatusBadRequest, "invalid RunAgentInput: "+err.Error())
		return
	}
	if in.ThreadID == "" || in.RunID == "" || in.Messages == nil {
		fail(http.StatusBadRequest, "RunAgentInput needs threadId, runId and messages")
		return
	}
	thinking := true
	if on, ok := in.ForwardedProps["thinking"].(bool); ok {
		thinking = on
	}
	role := func(m aguiInMessage) string { return m.Role }
	content := func(m aguiInMessage) string { return textOf(m.Content) }
	question, toolResult, round := lastUserAndRound(in.Messages, role, content, func(m aguiInMessage) bool { return len(m.ToolCalls) > 0 })
	ti := turnInput{model: "qwen3-agent", question: question, toolResult: toolResult, round: round,
		thinkingOn: thinking, softNoThink: thinking && softNoThink(in.Messages, role, content)}
	pc := newPacer(w, r, s.pacing)
	pl := s.plan(ti, func() string { return "call_" + gonanoid.Must(12) })
	pc.pacing = pl.pacing
	if f := pl.fault; f != nil && f.Kind == "html" {
		badGateway(w)
		return
	}
	if f := pl.fault; f != nil && f.Kind == "http" {
		fail(max(f.Status, 400), orDefault(f.Message, "agent unavailable"))
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(fields ...kv) error {
		ev := obj(fields)
		ev = append(ev, kv{"timestamp", time.Now().UnixMilli()})
		return pc.writeSSE(ev)
	}
	if send(kv{"type", "RUN_STARTED"}, kv{"threadId", in.ThreadID}, kv{"runId", in.RunID}) != nil {
		return
	}
	fault := pl.fault
	// stream sends text token by token through deltaEvent; false means
	// the run ended (a fault or a gone client).
	stream := func(text string, deltaEvent func(tok string) error) bool {
		for _, t := range tokenize(text) {
			if pc.faultDue(fault) {
				switch fault.Kind {
				case "error":
					_ = send(kv{"type", "RUN_ERROR"}, kv{"message", orDefault(fault.Message, "the model crashed")}, kv{"code", "model_error"})
					return false
				case "cut", "no-finish":
					_ = cut(w)
					return false
				case "stall":
					_ = sleep(pc.ctx, time.Duration(fault.StallMs)*time.Millisecond)
				}
				fault = nil
			}
			if pc.token() != nil || deltaEvent(t) != nil {
				return false
			}
		}
		return true
	}
	if pl.thinks && pl.reasoning != "" {
		span, msgID := gonanoid.Must(), gonanoid.Must()
		switch profile {
		case "agui-thinking":
			if send(kv{"type", "THINKING_START"}) != nil || send(kv{"type", "THINKING_TEXT_MESSAGE_START"}) != nil {
				return
			}
			if !stream(pl.reasoning, func(t string) error { return send(kv{"type", "THINKING_TEXT_MESSAGE_CONTENT"}, kv{"delta", t}) }) {
				return
			}
			if send(kv{"type", "THINKING_TEXT_MESSAGE_END"}) != nil || send(kv{"type", "THINKING_END"}) != nil {
				return
			}
		case "agui-chunks":
			if !stream(pl.reasoning, func(t string) error {
				return send(kv{"type", "REASONING_MESSAGE_CHUNK"}, kv{"messageId", msgID}, kv{"delta", t})
			}) {
				return
			}
		default:
			if send(kv{"type", "REASONING_START"}, kv{"messageId", span}) != nil ||
				send(kv{"type", "REASONING_MESSAGE_START"}, kv{"messageId", msgID}, kv{"role", "reasoning"}) != nil {
				return
			}
			if !stream(pl.reasoning, func(t string) error {
				return send(kv{"type", "REASONING_MESSAGE_CONTENT"}, kv{"messageId", msgID}, kv{"delta", t})
			}) {
				return
			}
			if send(kv{"type", "REASONING_MESSAGE_END"}, kv{"messageId", msgID}) != nil {
				return
			}
		}
		if pl.encrypted != "" && profile != "agui-thinking" {
			if send(kv{"type", "REASONING_ENCRYPTED_VALUE"}, kv{"subtype", "message"}, kv{"entityId", msgID}, kv{"encryptedValue", pl.encrypted}) != nil {
				return
			}
		}
		if profile == "agui" && send(kv{"type", "REASONING_END"}, kv{"messageId", span}) != nil {
			return
		}
	}
	textID := gonanoid.Must()
	if pl.answer != "" {
		if profile == "agui-chunks" {
			if !stream(pl.answer, func(t string) error {
				return send(kv{"type", "TEXT_MESSAGE_CHUNK"}, kv{"messageId", textID}, kv{"role", "assistant"}, kv{"delta", t})
			}) {
				return
			}
		} else {
			if send(kv{"type", "TEXT_MESSAGE_START"}, kv{"messageId", textID}, kv{"role", "assistant"}) != nil {
				return
			}
			if !stream(pl.answer, func(t string) error {
				return send(kv{"type", "TEXT_MESSAGE_CONTENT"}, kv{"messageId", textID}, kv{"delta", t})
			}) {
				return
			}
			if send(kv{"type", "TEXT_MESSAGE_END"}, kv{"messageId", textID}) != nil {
				return
			}
		}
	}
	for _, c := range pl.calls {
		if pc.token() != nil {
			return
		}
		if profile == "agui-chunks" {
			if send(kv{"type", "TOOL_CALL_CHUNK"}, kv{"toolCallId", c.id}, kv{"toolCallName", c.name}, kv{"parentMessageId", textID}, kv{"delta", c.args}) != nil {
				return
			}
		} else if send(kv{"type", "TOOL_CALL_START"}, kv{"toolCallId", c.id}, kv{"toolCallName", c.name}, kv{"parentMessageId", textID}) != nil ||
			send(kv{"type", "TOOL_CALL_ARGS"}, kv{"toolCallId", c.id}, kv{"delta", c.args}) != nil ||
			send(kv{"type", "TOOL_CALL_END"}, kv{"toolCallId", c.id}) != nil {
			return
		}
		if c.encrypted != "" && profile != "agui-thinking" {
			if send(kv{"type", "REASONING_ENCRYPTED_VALUE"}, kv{"subtype", "tool-call"}, kv{"entityId", c.id}, kv{"encryptedValue", c.encrypted}) != nil {
				return
			}
		}
	}
	if fault != nil && fault.Kind == "error" {
		_ = send(kv{"type", "RUN_ERROR"}, kv{"message", orDefault(fault.Message, "the model crashed")}, kv{"code", "model_error"})
		return
	}
	_ = send(kv{"type", "RUN_FINISHED"}, kv{"threadId", in.ThreadID}, kv{"runId", in.RunID})
}
