package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
	"github.com/alicia-voice/alicia/wire/agui"
)

// runInput is AG-UI's RunAgentInput as Alicia reads it. Unknown members
// are ignored; whole-field legacy nulls are accepted.
type runInput struct {
	ThreadID        *string          `json:"threadId"`
	RunID           *string          `json:"runId"`
	ProtocolVersion string           `json:"protocolVersion"`
	Messages        *[]inputMessage  `json:"messages"`
	Tools           []inputTool      `json:"tools"`
	Context         []inputContext   `json:"context"`
	ForwardedProps  *json.RawMessage `json:"forwardedProps"`
}

type inputMessage struct {
	ID             string          `json:"id"`
	Role           string          `json:"role"`
	Content        json.RawMessage `json:"content"`
	ToolCalls      []inputToolCall `json:"toolCalls"`
	ToolCallID     string          `json:"toolCallId"`
	EncryptedValue string          `json:"encryptedValue"`
}

type inputToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	EncryptedValue string `json:"encryptedValue"`
}

type inputTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type inputContext struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// contentText reads a message content given as a string or as parts;
// parts the model cannot use (images, audio) are skipped.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content must be a string or an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// AGUI serves POST requests with an AG-UI RunAgentInput and answers with
// the run as AG-UI events over SSE: the same assistant, reasoning and
// conversations as over LiveKit. threadId is the conversation id; the
// bearer token's identity must own it.
type AGUI struct {
	cfg          Config
	store        storage.Store
	authenticate func(*http.Request) (string, error)
	log          *slog.Logger
}

// NewAGUI returns the AG-UI endpoint.
func NewAGUI(cfg Config, store storage.Store, authenticate func(*http.Request) (string, error)) *AGUI {
	cfg.withDefaults()
	return &AGUI{cfg: cfg, store: store, authenticate: authenticate, log: cfg.Logger}
}

func httpFail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (a *AGUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	identity, err := a.authenticate(r)
	if err != nil {
		httpFail(w, http.StatusUnauthorized, err.Error())
		return
	}
	var in runInput
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&in); err != nil {
		httpFail(w, http.StatusBadRequest, "the body is not a RunAgentInput: "+err.Error())
		return
	}
	if in.ThreadID == nil || in.RunID == nil || in.Messages == nil {
		httpFail(w, http.StatusBadRequest, "RunAgentInput needs threadId, runId and messages")
		return
	}
	if *in.ThreadID == "" || *in.RunID == "" {
		httpFail(w, http.StatusBadRequest, "threadId and runId must not be empty")
		return
	}
	messages, err := toLLM(*in.Messages)
	if err != nil {
		httpFail(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(messages) == 0 || messages[len(messages)-1].Role == llm.RoleAssistant {
		httpFail(w, http.StatusBadRequest, "messages must end with a user or tool message")
		return
	}
	conv, err := a.store.Conversation(r.Context(), *in.ThreadID)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		a.store.SaveConversation(storage.Conversation{ID: *in.ThreadID, Owner: identity, CreatedAt: time.Now()})
	case err != nil:
		httpFail(w, http.StatusServiceUnavailable, "storage unavailable")
		return
	case conv.Owner != identity:
		httpFail(w, http.StatusNotFound, "no such thread")
		return
	}
	mode, _ := a.store.Mode(r.Context(), identity)
	if in.ForwardedProps != nil {
		var fp struct {
			Reasoning reasoning.Mode `json:"reasoning"`
		}
		if json.Unmarshal(*in.ForwardedProps, &fp) == nil && fp.Reasoning.Valid() {
			mode = fp.Reasoning
		}
	}
	system := a.cfg.System
	for _, c := range in.Context {
		system += "\n\n" + c.Description + ": " + c.Value
	}
	clientTools := map[string]bool{}
	var tools []llm.Tool
	for _, t := range a.cfg.Tools {
		tools = append(tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: schema(t.Parameters)})
	}
	for _, t := range in.Tools {
		if t.Name == "" {
			httpFail(w, http.StatusBadRequest, "every tool needs a name")
			return
		}
		clientTools[t.Name] = true
		params := []byte(t.Parameters)
		if string(params) == "null" {
			params = nil
		}
		tools = append(tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: params})
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	emit := func(ev agui.Event) {
		if ev.Timestamp == 0 {
			ev.Timestamp = time.Now().UnixMilli()
		}
		if agui.WriteSSE(w, &ev) == nil {
			_ = rc.Flush()
		}
	}
	run := &aguiRun{a: a, emit: emit, threadID: *in.ThreadID, runID: *in.RunID, v1: in.ProtocolVersion != "",
		clientTools: clientTools, mode: mode}
	run.serve(r.Context(), &llm.Request{ConversationID: *in.ThreadID, System: system, Thinking: a.cfg.Thinking, Tools: tools, Messages: messages})
}

// toLLM turns AG-UI messages into the model's conversation.
func toLLM(in []inputMessage) ([]llm.Message, error) {
	var out []llm.Message
	for i, m := range in {
		text, err := contentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("message %d: %v", i, err)
		}
		msg := llm.Message{ID: m.ID, Content: text, EncryptedValue: m.EncryptedValue}
		switch m.Role {
		case "user":
			msg.Role = llm.RoleUser
		case "assistant":
			msg.Role = llm.RoleAssistant
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments, EncryptedValue: tc.EncryptedValue})
			}
		case "tool":
			msg.Role, msg.ToolCallID = llm.RoleTool, m.ToolCallID
		case "reasoning":
			msg.Role = llm.RoleReasoning
		case "system", "developer":
			msg.Role = llm.RoleSystem
		case "activity":
			continue
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		out = append(out, msg)
	}
	return out, nil
}

// aguiRun is one AG-UI run.
type aguiRun struct {
	a                 *AGUI
	emit              func(agui.Event)
	threadID, runID   string
	v1                bool
	clientTools       map[string]bool
	mode              reasoning.Mode
	textID            string
	textOpen, started bool
}

func (r *aguiRun) serve(ctx context.Context, req *llm.Request) {
	r.emit(agui.Event{Type: agui.RunStarted, ThreadID: r.threadID, RunID: r.runID, ProtocolVersion: "1.0"})
	store := r.a.store
	userID := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == llm.RoleUser {
			userID = m.ID
			if userID == "" {
				userID = wire.NewID("msg")
			}
			store.SaveMessage(storage.Message{ID: userID, ConversationID: r.threadID, Role: "user", Content: m.Content, Status: storage.StatusComplete})
			break
		}
	}
	assistantID := wire.NewID("am")
	r.textID = assistantID
	events := reasoning.NewAGUIEvents(r.mode, func(e agui.Event) {
		if e.Type == agui.ReasoningEncryptedValue && !r.v1 {
			return // unknown to clients before 1.0
		}
		r.emit(e)
	})
	chain := reasoning.NewChain(r.threadID, userID, assistantID, events, reasoning.OnSealed(store.SaveStep))
	var answer strings.Builder
	failure := r.a.cfg.rounds(ctx, req, chain, nil, turnHooks{
		text: func(delta string) {
			answer.WriteString(delta)
			r.text(delta)
		},
		roundEnd: r.closeText,
		tools: func(calls []llm.ToolCall) ([]llm.Message, bool) {
			for _, c := range calls {
				r.emit(agui.Event{Type: agui.ToolCallStart, ToolCallID: c.ID, ToolCallName: c.Name, ParentMessageID: assistantID})
				if c.Arguments != "" {
					r.emit(agui.Event{Type: agui.ToolCallArgs, ToolCallID: c.ID, Delta: c.Arguments})
				}
				r.emit(agui.Event{Type: agui.ToolCallEnd, ToolCallID: c.ID})
			}
			if r.anyClientCall(calls) {
				// The client runs its own tools: the run ends here and the
				// next run's tool messages continue it.
				return nil, true
			}
			var results []llm.Message
			for _, c := range calls {
				content := r.runServerTool(ctx, c)
				result, _ := json.Marshal(content)
				r.emit(agui.Event{Type: agui.ToolCallResult, MessageID: wire.NewID("tr"), ToolCallID: c.ID, Content: result, Role: "tool"})
				results = append(results, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: content})
			}
			return results, false
		},
	})
	chain.End(time.Now())
	status := storage.StatusComplete
	if ctx.Err() != nil {
		status = storage.StatusStopped
	} else if failure != nil {
		status = storage.StatusFailed
	}
	store.SaveMessage(storage.Message{ID: assistantID, ConversationID: r.threadID, PreviousID: userID, Role: "assistant", Content: answer.String(), Status: status})
	switch {
	case ctx.Err() != nil:
		return // the client went away: nobody to tell
	case failure != nil:
		r.emit(agui.Event{Type: agui.RunError, Message: "The model failed: " + plainReason(failure), Code: "model_error"})
	default:
		r.emit(agui.Event{Type: agui.RunFinished, ThreadID: r.threadID, RunID: r.runID})
	}
}

func (r *aguiRun) anyClientCall(calls []llm.ToolCall) bool {
	for _, c := range calls {
		if r.clientTools[c.Name] {
			return true
		}
	}
	return false
}

func (r *aguiRun) runServerTool(ctx context.Context, c llm.ToolCall) string {
	tool := toolNamed(r.a.cfg.Tools, c.Name)
	fail := func(msg string) string {
		b, _ := json.Marshal(map[string]string{"error": msg})
		return string(b)
	}
	if tool == nil {
		return fail(fmt.Sprintf("there is no tool named %q", c.Name))
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
		return fail("arguments must be a JSON object")
	}
	res, err := tool.Run(ctx, args)
	if err != nil {
		return fail(err.Error())
	}
	b, _ := json.Marshal(res)
	return string(b)
}

// text streams answer text as one assistant message per run.
func (r *aguiRun) text(delta string) {
	if delta == "" {
		return
	}
	if !r.textOpen {
		if r.started {
			r.textID = wire.NewID("am") // text after a tool round is a new message
		}
		r.started, r.textOpen = true, true
		r.emit(agui.Event{Type: agui.TextMessageStart, MessageID: r.textID, Role: "assistant"})
	}
	r.emit(agui.Event{Type: agui.TextMessageContent, MessageID: r.textID, Delta: delta})
}

func (r *aguiRun) closeText() {
	if r.textOpen {
		r.textOpen = false
		r.emit(agui.Event{Type: agui.TextMessageEnd, MessageID: r.textID})
	}
}
