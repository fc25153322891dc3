// Package agui is the AG-UI 1.0 event model Alicia produces for AG-UI
// clients, its SSE framing, and a checker of the rules @ag-ui/client 1.0.0
// enforces on a stream.
package agui

import (
	"encoding/json"
	"io"
)

// EventType names an AG-UI event.
type EventType string

const (
	RunStarted              EventType = "RUN_STARTED"
	RunFinished             EventType = "RUN_FINISHED"
	RunError                EventType = "RUN_ERROR"
	StepStarted             EventType = "STEP_STARTED"
	StepFinished            EventType = "STEP_FINISHED"
	TextMessageStart        EventType = "TEXT_MESSAGE_START"
	TextMessageContent      EventType = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          EventType = "TEXT_MESSAGE_END"
	TextMessageChunk        EventType = "TEXT_MESSAGE_CHUNK"
	ToolCallStart           EventType = "TOOL_CALL_START"
	ToolCallArgs            EventType = "TOOL_CALL_ARGS"
	ToolCallEnd             EventType = "TOOL_CALL_END"
	ToolCallChunk           EventType = "TOOL_CALL_CHUNK"
	ToolCallResult          EventType = "TOOL_CALL_RESULT"
	ReasoningStart          EventType = "REASONING_START"
	ReasoningMessageStart   EventType = "REASONING_MESSAGE_START"
	ReasoningMessageContent EventType = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     EventType = "REASONING_MESSAGE_END"
	ReasoningMessageChunk   EventType = "REASONING_MESSAGE_CHUNK"
	ReasoningEnd            EventType = "REASONING_END"
	ReasoningEncryptedValue EventType = "REASONING_ENCRYPTED_VALUE"
	StateSnapshot           EventType = "STATE_SNAPSHOT"
	MessagesSnapshot        EventType = "MESSAGES_SNAPSHOT"
	Custom                  EventType = "CUSTOM"
)

// Encrypted-value subtypes.
const (
	SubtypeMessage  = "message"
	SubtypeToolCall = "tool-call"
)

// Event is one AG-UI event. Optional fields are omitted when empty, never
// sent as null (a null in an optional slot is fatal to the 1.0 client).
// Only the fields of its Type are set.
type Event struct {
	Type            EventType       `json:"type"`
	Timestamp       int64           `json:"timestamp,omitempty"`
	ThreadID        string          `json:"threadId,omitempty"`
	RunID           string          `json:"runId,omitempty"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	MessageID       string          `json:"messageId,omitempty"`
	Role            string          `json:"role,omitempty"`
	Delta           string          `json:"delta,omitempty"`
	ToolCallID      string          `json:"toolCallId,omitempty"`
	ToolCallName    string          `json:"toolCallName,omitempty"`
	ParentMessageID string          `json:"parentMessageId,omitempty"`
	Content         json.RawMessage `json:"content,omitempty"`
	Subtype         string          `json:"subtype,omitempty"`
	EntityID        string          `json:"entityId,omitempty"`
	EncryptedValue  string          `json:"encryptedValue,omitempty"`
	StepName        string          `json:"stepName,omitempty"`
	Message         string          `json:"message,omitempty"`
	Code            string          `json:"code,omitempty"`
	// Name and Value are a CUSTOM event's.
	Name  string          `json:"name,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// CustomReasoningCutShort names the CUSTOM event that follows the last
// reasoning message of reasoning stopped before the model finished it (a
// reasoning budget ran out); its value is {"messageId": <that message>}.
const CustomReasoningCutShort = "alicia.reasoning_cut_short"

// CustomTextRetracted names the CUSTOM event that takes back a text
// message already streamed, which AG-UI's text events cannot: its text was
// the model's reasoning (a bare </think> came after it), and the same text
// follows as reasoning messages. Its value is {"messageId": <that message>};
// the answer continues as a new text message.
const CustomTextRetracted = "alicia.text_retracted"

// WriteSSE writes one event as an SSE frame: "data: <json>\n\n", LF only.
func WriteSSE(w io.Writer, ev *Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(b)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, '\n', '\n')
	_, err = w.Write(buf)
	return err
}
