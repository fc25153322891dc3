// Package llm streams one chat turn from a Qwen3 model behind any common
// serving backend and hides their differences: OpenAI-compatible servers
// (vLLM, SGLang, llama.cpp, Ollama's /v1, DashScope, OpenRouter), Ollama's
// native API, and AG-UI agents.
//
// A stream yields reasoning deltas, answer-text deltas, complete tool calls,
// usage, and ends with exactly one Finish or Error event. Reasoning never
// leaks into answer text nor answer text into reasoning, whichever way the
// backend encodes it (a reasoning field, inline <think> tags, tags split
// across chunks, a missing opening tag).
package llm

import (
	"context"
	"fmt"
	"iter"

	"github.com/alicia-voice/alicia/internal/provider"
)

// Role of a message in the conversation sent to the model.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
	// RoleReasoning carries an AG-UI reasoning message back to an AG-UI
	// backend (for its encrypted value); other backends never see it.
	RoleReasoning Role = "reasoning"
)

// Message is one entry of the conversation.
type Message struct {
	// ID is the message's id, sent to backends that track messages (AG-UI).
	ID      string
	Role    Role
	Content string
	// Reasoning is the model's reasoning for an assistant message. It is
	// sent back only for assistant messages after the last user message,
	// inside the current turn's tool loop, as Qwen3 expects; earlier turns'
	// reasoning never reaches the model.
	Reasoning string
	// ToolCalls made by an assistant message.
	ToolCalls []ToolCall
	// ToolCallID ties a tool message to the call it answers.
	ToolCallID string
	// EncryptedValue is an opaque value an AG-UI backend attached to this
	// message; it goes back only to that backend.
	EncryptedValue string
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is a JSON Schema object (raw JSON); empty means no
	// parameters.
	Parameters []byte
}

// ToolCall is a complete call requested by the model.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is a JSON object as text.
	Arguments string
	// EncryptedValue is an AG-UI backend's opaque value for this call.
	EncryptedValue string
	// Result is set when the backend already ran the call itself (an
	// AG-UI agent's own tool); the caller must not run it again.
	Result *string
}

// Sampling parameters. Request.Sampling nil means Qwen3's recommendation
// for the mode.
type Sampling struct {
	Temperature float64
	TopP        float64
	TopK        int
	MinP        float64
}

// Qwen3's recommended sampling (model card): never greedy when thinking.
var (
	SamplingThinking    = Sampling{Temperature: 0.6, TopP: 0.95, TopK: 20, MinP: 0}
	SamplingNonThinking = Sampling{Temperature: 0.7, TopP: 0.8, TopK: 20, MinP: 0}
)

// Request is one chat turn.
type Request struct {
	// ConversationID identifies the conversation to backends that keep
	// threads (AG-UI's threadId).
	ConversationID string
	// System is the system prompt, sent before Messages.
	System   string
	Messages []Message
	Tools    []Tool
	// Thinking asks the model to reason before it answers.
	Thinking  bool
	Sampling  *Sampling
	MaxTokens int
	// Continue asks for the answer at once after reasoning cut short
	// (AnswerNow).
	Continue *Continuation
}

func (r *Request) sampling() Sampling {
	switch {
	case r.Sampling != nil:
		return *r.Sampling
	case r.Thinking:
		return SamplingThinking
	default:
		return SamplingNonThinking
	}
}

// EventKind tells what an Event carries.
type EventKind uint8

const (
	// EventReasoning: Text is a reasoning delta. MessageID names the
	// reasoning message when the backend has such ids (AG-UI).
	EventReasoning EventKind = iota + 1
	// EventReasoningEnd: the reasoning message MessageID ended (an AG-UI
	// backend's REASONING_MESSAGE_END).
	EventReasoningEnd
	// EventText: Text is an answer delta.
	EventText
	// EventToolCall: ToolCall is complete.
	EventToolCall
	// EventEncrypted: an AG-UI backend's encrypted value for a reasoning
	// message (MessageID) that has already streamed.
	EventEncrypted
	// EventUsage: Usage holds the token counts.
	EventUsage
	// EventFinish: the model finished; Finish says why. Always last.
	EventFinish
	// EventError: the turn failed; Err is an *Error. Always last.
	EventError
	// EventRetract: the answer text this response streamed so far (Text,
	// its EventText deltas since the response began or since the last
	// EventRetract) was reasoning: a bare </think> just ended it, so the
	// model's template had opened <think> in the prompt where the client
	// expected it not to. Take it back from the answer; the same text
	// follows as EventReasoning unless the server had delivered the
	// reasoning in a reasoning field already.
	EventRetract
)

func (k EventKind) String() string {
	switch k {
	case EventReasoning:
		return "reasoning"
	case EventReasoningEnd:
		return "reasoning-end"
	case EventText:
		return "text"
	case EventToolCall:
		return "tool-call"
	case EventEncrypted:
		return "encrypted"
	case EventUsage:
		return "usage"
	case EventFinish:
		return "finish"
	case EventError:
		return "error"
	case EventRetract:
		return "retract"
	}
	return fmt.Sprintf("EventKind(%d)", k)
}

// FinishReason says why the model stopped.
type FinishReason string

const (
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishContentFilter FinishReason = "content_filter"
)

// Usage counts tokens.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	ReasoningTokens  int
}

// Event is one item of a stream.
type Event struct {
	Kind      EventKind
	Text      string
	MessageID string
	ToolCall  *ToolCall
	Encrypted string
	Usage     *Usage
	Finish    FinishReason
	Err       error
}

func (e Event) String() string {
	switch e.Kind {
	case EventReasoning, EventText, EventRetract:
		return fmt.Sprintf("%s %q", e.Kind, e.Text)
	case EventReasoningEnd:
		return fmt.Sprintf("%s %s", e.Kind, e.MessageID)
	case EventToolCall:
		return fmt.Sprintf("%s %s %s(%s)", e.Kind, e.ToolCall.ID, e.ToolCall.Name, e.ToolCall.Arguments)
	case EventEncrypted:
		return fmt.Sprintf("%s %s", e.Kind, e.MessageID)
	case EventUsage:
		return fmt.Sprintf("%s %d+%d", e.Kind, e.Usage.PromptTokens, e.Usage.CompletionTokens)
	case EventFinish:
		return fmt.Sprintf("%s %s", e.Kind, e.Finish)
	case EventError:
		return fmt.Sprintf("%s %v", e.Kind, e.Err)
	}
	return e.Kind.String()
}

// Client streams chat turns from one backend.
type Client interface {
	// Stream starts a turn. The sequence ends with one EventFinish or
	// EventError; breaking out of the loop early, or cancelling ctx, stops
	// the backend's generation.
	Stream(ctx context.Context, req *Request) iter.Seq[Event]
}

// Error is a failed turn: the one error type of every provider client,
// named here so that callers of llm need not reach for another package.
// Its Service is "llm".
type Error = provider.Error

// service is the Service of llm's errors.
const service = "llm"

// ErrorKind classifies failures so that callers can word them for users
// and decide whether to retry.
type ErrorKind = provider.ErrorKind

const (
	ErrHTTP      = provider.ErrHTTP
	ErrMidStream = provider.ErrMidStream
	ErrTruncated = provider.ErrTruncated
	ErrIdle      = provider.ErrIdle
	ErrConnect   = provider.ErrConnect
	ErrProtocol  = provider.ErrProtocol
	ErrCancelled = provider.ErrCancelled
)

// AsError returns err as an *Error, if it is one.
func AsError(err error) (*Error, bool) { return provider.AsError(err) }
