package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"strings"

	gonanoid "github.com/matoous/go-nanoid/v2"

	"github.com/alicia-voice/alicia/internal/provider"
	"github.com/alicia-voice/alicia/llm/chunk"
)

// aguiAgent talks to an AG-UI agent over HTTP: one RunAgentInput POST, an
// SSE stream of events back.
type aguiAgent struct {
	http httpBackend
	know *modelKnowledge
}

type aguiInput struct {
	ThreadID        string         `json:"threadId"`
	RunID           string         `json:"runId"`
	ProtocolVersion string         `json:"protocolVersion"`
	State           map[string]any `json:"state"`
	Messages        []aguiMessage  `json:"messages"`
	Tools           []aguiTool     `json:"tools"`
	Context         []any          `json:"context"`
	ForwardedProps  map[string]any `json:"forwardedProps"`
}

type aguiMessage struct {
	ID             string         `json:"id"`
	Role           string         `json:"role"`
	Content        *string        `json:"content,omitempty"`
	ToolCalls      []aguiToolCall `json:"toolCalls,omitempty"`
	ToolCallID     string         `json:"toolCallId,omitempty"`
	EncryptedValue string         `json:"encryptedValue,omitempty"`
}

type aguiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	EncryptedValue string `json:"encryptedValue,omitempty"`
}

type aguiTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

func (c *aguiAgent) input(req *Request) *aguiInput {
	in := &aguiInput{
		ThreadID:        req.ConversationID,
		RunID:           gonanoid.Must(),
		ProtocolVersion: "1.0",
		State:           map[string]any{},
		Tools:           []aguiTool{},
		Context:         []any{},
		// AG-UI has no thinking switch; the agent reads ours here.
		ForwardedProps: map[string]any{"thinking": req.Thinking},
	}
	str := func(s string) *string { return &s }
	lastUser := -1
	for i, m := range req.Messages {
		if m.Role == RoleUser {
			lastUser = i
		}
	}
	system := req.System
	if !req.Thinking {
		// An AG-UI agent has no standard thinking switch: Qwen3's own
		// soft switch says it to the model behind it, forwardedProps to
		// an agent that reads it.
		system = strings.TrimSpace(system + "\n\n/no_think")
	}
	if system != "" {
		in.Messages = append(in.Messages, aguiMessage{ID: "system", Role: "system", Content: str(system)})
	}
	for i, m := range req.Messages {
		am := aguiMessage{ID: m.ID, Role: string(m.Role), ToolCallID: m.ToolCallID, EncryptedValue: m.EncryptedValue}
		if am.ID == "" {
			am.ID = gonanoid.Must()
		}
		switch m.Role {
		case RoleReasoning:
			// Earlier turns' reasoning goes back only as the agent's own
			// encrypted value, never as text (Qwen3's history rule).
			if m.EncryptedValue == "" && i < lastUser {
				continue
			}
			content := m.Content
			if i < lastUser {
				content = ""
			}
			am.Content = str(content)
		case RoleAssistant:
			content := m.Content
			if i < lastUser {
				content = stripThink(content)
			}
			am.Content = str(content)
			for _, tc := range m.ToolCalls {
				var atc aguiToolCall
				atc.ID, atc.Type, atc.EncryptedValue = tc.ID, "function", tc.EncryptedValue
				atc.Function.Name, atc.Function.Arguments = tc.Name, tc.Arguments
				am.ToolCalls = append(am.ToolCalls, atc)
			}
		default:
			am.Content = str(m.Content)
		}
		in.Messages = append(in.Messages, am)
	}
	for _, t := range req.Tools {
		in.Tools = append(in.Tools, aguiTool{Name: t.Name, Description: t.Description, Parameters: json.RawMessage(t.Parameters)})
	}
	return in
}

// aguiRun tracks what is open in one run.
type aguiRun struct {
	t *turn
	// reasoning message opened by a *_CHUNK event, closed by the next
	// event of another kind (as @ag-ui/client's transformChunks does).
	chunkReasoning string
	chunkTool      string
	thinkingID     string // id minted for a deprecated THINKING_* message
	calls          []ToolCall
}

func (r *aguiRun) call(id string) *ToolCall {
	for i := range r.calls {
		if r.calls[i].ID == id {
			return &r.calls[i]
		}
	}
	return nil
}

func (r *aguiRun) closeChunks(except string) {
	if r.chunkReasoning != "" && except != "REASONING_MESSAGE_CHUNK" {
		r.t.reasoningEnd(r.chunkReasoning)
		r.chunkReasoning = ""
	}
	if except != "TOOL_CALL_CHUNK" {
		r.chunkTool = ""
	}
}

// apply handles one event; done reports the end of the run.
func (r *aguiRun) apply(ev *chunk.AGUIEvent) (done bool, fail *Error) {
	switch ev.Type {
	case "RAW", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA", "REASONING_ENCRYPTED_VALUE":
		// These do not close chunked items.
	default:
		r.closeChunks(ev.Type)
	}
	delta := ""
	if ev.Delta != nil {
		delta = *ev.Delta
	}
	switch ev.Type {
	case "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_MESSAGE_CHUNK", "REASONING_ENCRYPTED_VALUE":
		r.reasoning(ev, delta)
	case "THINKING_TEXT_MESSAGE_START", "THINKING_TEXT_MESSAGE_CONTENT", "THINKING_TEXT_MESSAGE_END":
		r.thinking(ev.Type, delta)
	case "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK":
		r.t.contentText(delta)
	case "TOOL_CALL_START", "TOOL_CALL_CHUNK", "TOOL_CALL_ARGS", "TOOL_CALL_RESULT":
		r.toolCall(ev, delta)
	case "RUN_FINISHED":
		r.finish(ev)
		return true, nil
	case "RUN_ERROR":
		return true, &Error{Service: service, Kind: ErrMidStream, Code: ev.Code, Message: ev.Message}
	}
	return false, nil
}

// reasoning handles the REASONING_* events, which name the message they
// add to, or for a chunk may leave it to the chunk before.
func (r *aguiRun) reasoning(ev *chunk.AGUIEvent, delta string) {
	switch ev.Type {
	case "REASONING_MESSAGE_CONTENT":
		r.t.reasoningField(delta, ev.MessageID)
	case "REASONING_MESSAGE_END":
		r.t.reasoningEnd(ev.MessageID)
	case "REASONING_MESSAGE_CHUNK":
		r.reasoningChunk(ev.MessageID, delta)
	case "REASONING_ENCRYPTED_VALUE":
		// A tool call's value travels with the call, given at the run's
		// end; a message's goes to the turn at once.
		if ev.Subtype == "tool-call" {
			if c := r.call(ev.EntityID); c != nil {
				c.EncryptedValue = ev.EncryptedValue
			}
		} else {
			r.t.encrypted(ev.EntityID, ev.EncryptedValue)
		}
	}
}

// reasoningChunk adds to the chunked reasoning message: a chunk naming
// another message closes the open one, and a chunk naming none continues
// it, or opens one under a minted id.
func (r *aguiRun) reasoningChunk(id, delta string) {
	if id != "" && id != r.chunkReasoning {
		if r.chunkReasoning != "" {
			r.t.reasoningEnd(r.chunkReasoning)
		}
		r.chunkReasoning = id
	}
	if r.chunkReasoning == "" {
		r.chunkReasoning = gonanoid.Must()
	}
	r.t.reasoningField(delta, r.chunkReasoning)
}

// thinking handles the deprecated THINKING_TEXT_MESSAGE_* events, which
// carry no message id: one is minted per message, also for content that
// comes without a start.
func (r *aguiRun) thinking(typ, delta string) {
	switch typ {
	case "THINKING_TEXT_MESSAGE_START":
		r.thinkingID = gonanoid.Must()
	case "THINKING_TEXT_MESSAGE_CONTENT":
		if r.thinkingID == "" {
			r.thinkingID = gonanoid.Must()
		}
		r.t.reasoningField(delta, r.thinkingID)
	case "THINKING_TEXT_MESSAGE_END":
		if r.thinkingID != "" {
			r.t.reasoningEnd(r.thinkingID)
			r.thinkingID = ""
		}
	}
}

// toolCall gathers the TOOL_CALL_* events into r.calls; the turn hears of
// the calls only at the run's end, when their arguments are whole.
func (r *aguiRun) toolCall(ev *chunk.AGUIEvent, delta string) {
	switch ev.Type {
	case "TOOL_CALL_START":
		r.calls = append(r.calls, ToolCall{ID: ev.ToolCallID, Name: ev.ToolCallName})
	case "TOOL_CALL_CHUNK":
		r.toolCallChunk(ev, delta)
	case "TOOL_CALL_ARGS":
		if c := r.call(ev.ToolCallID); c != nil {
			c.Arguments += delta
		}
	case "TOOL_CALL_RESULT":
		if c := r.call(ev.ToolCallID); c != nil {
			c.Result = resultText(ev.Content)
		}
	}
}

// toolCallChunk adds to the chunked tool call: a chunk with an id opens
// the call if it is new and makes it the one later chunks without an id
// add to.
func (r *aguiRun) toolCallChunk(ev *chunk.AGUIEvent, delta string) {
	if ev.ToolCallID != "" && r.call(ev.ToolCallID) == nil {
		r.calls = append(r.calls, ToolCall{ID: ev.ToolCallID, Name: ev.ToolCallName})
	}
	if ev.ToolCallID != "" {
		r.chunkTool = ev.ToolCallID
	}
	if c := r.call(r.chunkTool); c != nil {
		c.Arguments += delta
	}
}

// resultText is a tool result's content as text: a JSON string unquoted,
// any other JSON value as it came.
func resultText(content json.RawMessage) *string {
	s := string(content)
	var text string
	if json.Unmarshal(content, &text) == nil {
		s = text
	}
	return &s
}

// finish hands the turn the run's tool calls and usage, and ends it: on
// tool calls if one of them still waits for its result (the caller is to
// run it), else on a stop.
func (r *aguiRun) finish(ev *chunk.AGUIEvent) {
	pending := false
	for _, c := range r.calls {
		if c.Arguments == "" {
			c.Arguments = "{}"
		}
		r.t.toolCall(c)
		pending = pending || c.Result == nil
	}
	var u Usage
	for _, x := range ev.Usage {
		u.PromptTokens += x.InputTokens
		u.CompletionTokens += x.OutputTokens
		u.ReasoningTokens += x.ReasoningTokens
	}
	if len(ev.Usage) > 0 {
		r.t.setUsage(u)
	}
	reason := FinishStop
	if pending {
		reason = FinishToolCalls
	}
	r.t.finish(reason)
}

func (c *aguiAgent) Stream(ctx context.Context, req *Request) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		req := followUpRequest(req, c.followUp())
		t := newTurn(req, c.know)
		t.explicitReasoning = true
		post := func() (*stream, *Error) { return c.http.post(ctx, "", c.input(req), "text/event-stream") }
		runStream(yield, t, post, func(s *stream, drain func() bool) *Error {
			run := &aguiRun{t: t}
			sse := newSSEReader(s)
			var ev chunk.AGUIEvent
			for {
				payload, _, err := sse.next()
				if errors.Is(err, io.EOF) {
					return &Error{Service: service, Kind: ErrTruncated, Message: "the run ended without RUN_FINISHED or RUN_ERROR"}
				}
				if err != nil {
					return s.failure(err)
				}
				ev = chunk.AGUIEvent{}
				if err := chunk.Decode(bytes.TrimSpace(payload), &ev); err != nil || ev.Type == "" {
					return &Error{Service: service, Kind: ErrProtocol, Message: "not an AG-UI event: " + provider.PlainText(payload)}
				}
				done, fail := run.apply(&ev)
				if fail != nil {
					return fail
				}
				if !drain() || done {
					return nil
				}
			}
		})
	}
}
