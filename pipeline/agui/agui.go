// Package agui is the engine's AG-UI face: a run posted over HTTP,
// answered as AG-UI events over SSE.
package agui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/internal/httpjson"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
	events "github.com/alicia-voice/alicia/wire/agui"
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

// Handler serves POST requests with an AG-UI RunAgentInput and answers
// with the run as AG-UI events over SSE: the same assistant, reasoning and
// conversations as over LiveKit. threadId is the conversation id; the
// bearer token's identity must own it.
type Handler struct {
	engine       *pipeline.Engine
	threads      Threads
	authenticate func(*http.Request) (string, error)
}

// Threads is where a run finds its thread's owner, and records a new
// thread as the caller's; storage.Store is one.
type Threads interface {
	Conversation(ctx context.Context, id string) (storage.Conversation, error)
	SaveConversation(storage.Conversation)
}

// New returns the AG-UI face of engine. threads should be the engine's
// own store, so that a thread begun here is the conversation a LiveKit
// room of the same id continues.
func New(engine *pipeline.Engine, threads Threads, authenticate func(*http.Request) (string, error)) *Handler {
	return &Handler{engine: engine, threads: threads, authenticate: authenticate}
}

func (a *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	identity, err := a.authenticate(r)
	if err != nil {
		httpjson.Error(w, http.StatusUnauthorized, err.Error())
		return
	}
	in, messages, err := readRun(w, r)
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	if status, msg := a.thread(r.Context(), *in.ThreadID, identity); status != 0 {
		httpjson.Error(w, status, msg)
		return
	}
	tools, err := clientTools(in.Tools)
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	mode, thinking := a.choices(r.Context(), identity, in.ForwardedProps)
	var system string
	for _, c := range in.Context {
		system += "\n\n" + c.Description + ": " + c.Value
	}
	user := lastQuestion(*in.ThreadID, messages)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	emit := func(ev events.Event) {
		if ev.Timestamp == 0 {
			ev.Timestamp = time.Now().UnixMilli()
		}
		if events.WriteSSE(w, &ev) == nil {
			_ = rc.Flush()
		}
	}
	emit(events.Event{Type: events.RunStarted, ThreadID: *in.ThreadID, RunID: *in.RunID, ProtocolVersion: "1.0"})
	face := &aguiFace{identity: identity, emit: emit, v1: in.ProtocolVersion != "", mode: mode, tools: tools}
	c := a.engine.Open(*in.ThreadID)
	defer c.Close()
	opts := append([]pipeline.AskOption{pipeline.WithMessages(messages), pipeline.WithSystem(system), pipeline.WithClientTools(tools, true)}, thinking...)
	t := c.Ask(r.Context(), face, identity, user, opts...)
	if t == nil {
		return // the client went away
	}
	select {
	case <-t.Done():
	case <-r.Context().Done():
		// The client went away: stop, keep what was said, tell nobody.
		t.Interrupt(wire.StopAll)
		<-t.Done()
		return
	}
	face.closeText()
	if !face.failed {
		emit(events.Event{Type: events.RunFinished, ThreadID: *in.ThreadID, RunID: *in.RunID})
	}
}

// thread finds the run's thread, or records a new one as identity's; a
// status other than 0 refuses the run, with msg.
func (a *Handler) thread(ctx context.Context, id, identity string) (status int, msg string) {
	conv, err := a.threads.Conversation(ctx, id)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		a.threads.SaveConversation(storage.Conversation{ID: id, Owner: identity, CreatedAt: time.Now()})
	case err != nil:
		return http.StatusServiceUnavailable, "storage unavailable"
	case conv.Owner != identity:
		return http.StatusNotFound, "no such thread"
	}
	return 0, ""
}

// choices are the reasoning shown and the thinking asked for: the user's
// preference, unless the run's forwarded properties choose.
func (a *Handler) choices(ctx context.Context, identity string, forwarded *json.RawMessage) (reasoning.Mode, []pipeline.AskOption) {
	mode := a.engine.Preference(ctx, identity)
	if forwarded == nil {
		return mode, nil
	}
	var fp struct {
		Reasoning reasoning.Mode        `json:"reasoning"`
		Thinking  pipeline.ThinkingMode `json:"thinking"`
	}
	if json.Unmarshal(*forwarded, &fp) != nil {
		return mode, nil
	}
	if fp.Reasoning.Valid() {
		mode = fp.Reasoning
	}
	// The run's own choice of thinking, as a LiveKit client's
	// typed_thinking feature chooses it for its turns.
	switch fp.Thinking {
	case pipeline.ThinkingOn, pipeline.ThinkingOff:
		return mode, []pipeline.AskOption{pipeline.WithThinking(fp.Thinking == pipeline.ThinkingOn)}
	case pipeline.ThinkingBudget:
		return mode, []pipeline.AskOption{pipeline.WithBudgetedThinking()}
	}
	return mode, nil
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

// aguiFace is one AG-UI run as a face of the engine: a single member
// (the bearer's identity) whose client streams text and renders
// reasoning from the chain, and the engine's bodies as AG-UI events.
type aguiFace struct {
	identity string
	v1       bool
	mode     reasoning.Mode
	tools    []wire.ClientTool

	// Tool calls run concurrently; events leave one at a time.
	mu       sync.Mutex
	emit     func(events.Event)
	textID   string
	textOpen bool
	texted   bool
	failed   bool
}

// The engine finds the renderers by type assertion: a face that stopped
// implementing one would still compile, and fall back to LiveKit bodies
// an AG-UI client cannot read.
var (
	_ pipeline.Face           = (*aguiFace)(nil)
	_ pipeline.StepRenderer   = (*aguiFace)(nil)
	_ pipeline.DeltaRenderer  = (*aguiFace)(nil)
	_ pipeline.DeltaRetractor = (*aguiFace)(nil)
)

func (f *aguiFace) Members() []pipeline.Member {
	return []pipeline.Member{{Identity: f.identity, Features: wire.Features{Streaming: true}, Tools: f.tools}}
}

func (f *aguiFace) Steps() reasoning.Listener {
	return reasoning.NewAGUIEvents(f.mode, func(e events.Event) {
		if e.Type == events.ReasoningEncryptedValue && !f.v1 {
			return // unknown to clients before 1.0
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.emit(e)
	})
}

// Delta streams answer text as one assistant message per model round.
func (f *aguiFace) Delta(answerID, delta string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.textOpen {
		f.textID = answerID
		if f.texted {
			f.textID = wire.NewID("am") // text after a tool round is a new message
		}
		f.texted, f.textOpen = true, true
		f.emit(events.Event{Type: events.TextMessageStart, MessageID: f.textID, Role: "assistant"})
	}
	f.emit(events.Event{Type: events.TextMessageContent, MessageID: f.textID, Delta: delta})
}

// Retract closes the text message that carried reasoning and names it in
// a CUSTOM event: AG-UI cannot take streamed text back, so a client that
// knows the event removes the message (and does not send it back as the
// assistant's history); the answer continues as a new text message.
func (f *aguiFace) Retract(string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.textOpen {
		return
	}
	id := f.textID
	f.closeTextLocked()
	value, _ := json.Marshal(map[string]string{"messageId": id})
	f.emit(events.Event{Type: events.Custom, Name: events.CustomTextRetracted, Value: value})
}

func (f *aguiFace) closeText() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeTextLocked()
}

func (f *aguiFace) closeTextLocked() {
	if f.textOpen {
		f.textOpen = false
		f.emit(events.Event{Type: events.TextMessageEnd, MessageID: f.textID})
	}
}

func (f *aguiFace) Send(body wire.Body, _ ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch b := body.(type) {
	case *wire.ToolUseRequest:
		f.closeTextLocked()
		f.emit(events.Event{Type: events.ToolCallStart, ToolCallID: b.ID, ToolCallName: b.ToolName, ParentMessageID: b.MessageID})
		if len(b.Parameters) > 0 {
			args, _ := json.Marshal(b.Parameters)
			f.emit(events.Event{Type: events.ToolCallArgs, ToolCallID: b.ID, Delta: string(args)})
		}
		f.emit(events.Event{Type: events.ToolCallEnd, ToolCallID: b.ID})
	case *wire.ToolUseResult:
		var content []byte
		if b.Success {
			content, _ = json.Marshal(b.Result)
		} else {
			content, _ = json.Marshal(map[string]string{"error": b.ErrorMessage})
		}
		result, _ := json.Marshal(string(content))
		f.emit(events.Event{Type: events.ToolCallResult, MessageID: wire.NewID("tr"), ToolCallID: b.RequestID, Content: result, Role: "tool"})
	case *wire.ErrorMessage:
		f.closeTextLocked()
		f.failed = true
		f.emit(events.Event{Type: events.RunError, Message: b.Message, Code: "model_error"})
	}
	// Acknowledgements have no AG-UI form; the answer and the reasoning
	// arrive through Delta and Steps.
}
