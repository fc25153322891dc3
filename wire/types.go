package wire

// Fields are named by their json tag, which is also their MessagePack key.
// A field whose tag says omitempty is optional: it is left out when empty
// and may be absent, nil or undefined on input. Every other field is
// required.

// ErrorMessage (type 1) reports a problem to the other side.
type ErrorMessage struct {
	ID             string   `json:"id"`
	ConversationID string   `json:"conversationId"`
	Code           int32    `json:"code"`
	Message        string   `json:"message"`
	Severity       Severity `json:"severity"`
	Recoverable    bool     `json:"recoverable"`
	OriginatingID  string   `json:"originatingId,omitempty"`
}

// UserMessage (type 2) is a user's text turn. Its id is chosen by the
// client and is the id the message keeps everywhere.
type UserMessage struct {
	ID             string `json:"id"`
	PreviousID     string `json:"previousId,omitempty"`
	ConversationID string `json:"conversationId"`
	Content        string `json:"content"`
	Timestamp      int64  `json:"timestamp,omitempty"`
	Attachments    any    `json:"attachments,omitempty"`
}

// AssistantMessage (type 3) is a whole answer, for clients that did not
// negotiate streaming.
type AssistantMessage struct {
	ID             string `json:"id"`
	PreviousID     string `json:"previousId,omitempty"`
	ConversationID string `json:"conversationId"`
	Content        string `json:"content"`
	Timestamp      int64  `json:"timestamp,omitempty"`
	State          string `json:"state,omitempty"`
}

// AudioChunk (type 4) describes audio that travels on a LiveKit track.
type AudioChunk struct {
	ConversationID string `json:"conversationId"`
	TrackSID       string `json:"trackSid"`
	Format         string `json:"format"`
	Duration       uint32 `json:"duration,omitempty"`
	Seq            uint32 `json:"seq,omitempty"`
	IsLast         bool   `json:"isLast,omitempty"`
	Timestamp      int64  `json:"timestamp,omitempty"`
}

// ReasoningStep (type 5) is one thought of the model while it prepares an
// answer. Every step of a turn names the same user message in PreviousID;
// StepIndex counts 1, 2, 3… within the turn.
type ReasoningStep struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversationId"`
	PreviousID     string `json:"previousId"`
	Content        string `json:"content"`
	StepIndex      int32  `json:"stepIndex"`
	TotalSteps     int32  `json:"totalSteps,omitempty"`
	// Partial marks a step still being written: it will be sent again under
	// the same ID with more content. The final form leaves it out.
	Partial bool `json:"partial,omitempty"`
	// CutShort marks the last step of reasoning that was stopped before
	// the model finished it (a reasoning budget ran out): the answer that
	// follows was asked for at once.
	CutShort bool `json:"cutShort,omitempty"`
}

// ToolUseRequest (type 6) announces or asks for a tool call.
type ToolUseRequest struct {
	ID             string         `json:"id"`
	ConversationID string         `json:"conversationId,omitempty"`
	MessageID      string         `json:"messageId,omitempty"`
	ToolName       string         `json:"toolName"`
	Parameters     map[string]any `json:"parameters"`
	Execution      Execution      `json:"execution"`
	TimeoutMs      int32          `json:"timeoutMs,omitempty"`
}

// ToolUseResult (type 7) is the outcome of a tool call.
type ToolUseResult struct {
	ID             string `json:"id,omitempty"`
	ConversationID string `json:"conversationId,omitempty"`
	RequestID      string `json:"requestId"`
	Success        bool   `json:"success"`
	Result         any    `json:"result,omitempty"`
	ErrorCode      string `json:"errorCode,omitempty"`
	ErrorMessage   string `json:"errorMessage,omitempty"`
}

// Acknowledgement (type 8) confirms a stanza or a message.
type Acknowledgement struct {
	ConversationID        string `json:"conversationId"`
	AcknowledgedStanzaID  int32  `json:"acknowledgedStanzaId,omitempty"`
	AcknowledgedMessageID string `json:"acknowledgedMessageId,omitempty"`
	LastSeenStanzaID      int32  `json:"lastSeenStanzaId,omitempty"`
	Notes                 string `json:"notes,omitempty"`
}

// Transcription (type 9) is recognised speech. A final one is the user's
// turn, and its ID is the user message's ID.
type Transcription struct {
	ID             string   `json:"id"`
	PreviousID     string   `json:"previousId,omitempty"`
	ConversationID string   `json:"conversationId"`
	Text           string   `json:"text"`
	Final          bool     `json:"final,omitempty"`
	Confidence     *float64 `json:"confidence,omitempty"`
	Language       string   `json:"language,omitempty"`
	// Speaker is the identity of the participant whose speech this is, so
	// that a room of several people sees who said what (Alicia's
	// addition; optional, and skipped by a client that does not know it).
	Speaker string `json:"speaker,omitempty"`
}

// ControlStop (type 10) asks the server to stop generating or speaking.
type ControlStop struct {
	ConversationID string   `json:"conversationId"`
	TargetID       string   `json:"targetId,omitempty"`
	Reason         string   `json:"reason,omitempty"`
	StopType       StopType `json:"stopType,omitempty"`
}

// ControlVariation (type 11) asks for another answer to a user message.
type ControlVariation struct {
	ConversationID string        `json:"conversationId"`
	TargetID       string        `json:"targetId"`
	Mode           VariationMode `json:"mode"`
	// NewContent carries an edit inline, as the reference clients send it;
	// without it the edited UserMessage follows as its own envelope.
	NewContent string `json:"newContent,omitempty"`
}

// Configuration (type 12) is the handshake and the settings update.
type Configuration struct {
	ConversationID    string         `json:"conversationId,omitempty"`
	LastSequenceSeen  int32          `json:"lastSequenceSeen,omitempty"`
	LastStanzaMap     map[string]any `json:"lastStanzaMap,omitempty"`
	ClientVersion     string         `json:"clientVersion,omitempty"`
	PreferredLanguage string         `json:"preferredLanguage,omitempty"`
	Device            string         `json:"device,omitempty"`
	Features          []string       `json:"features,omitempty"`
	EnableReordering  bool           `json:"enableReordering,omitempty"`
	// Tools the client runs itself (Alicia's addition): the server offers
	// them to the model, sends a ToolUseRequest with execution "client"
	// when the model calls one, and waits for the ToolUseResult.
	Tools []ClientTool `json:"tools,omitempty"`
}

// ClientTool describes a tool a client executes.
type ClientTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is a JSON Schema object.
	Parameters map[string]any `json:"parameters,omitempty"`
	// TimeoutMs is how long the server waits for the result (default
	// 30000).
	TimeoutMs int32 `json:"timeoutMs,omitempty"`
}

// StartAnswer (type 13) opens a streamed answer; its ID is the assistant
// message's ID.
type StartAnswer struct {
	ID                   string     `json:"id"`
	PreviousID           string     `json:"previousId"`
	ConversationID       string     `json:"conversationId"`
	AnswerType           AnswerType `json:"answerType,omitempty"`
	PlannedSentenceCount int32      `json:"plannedSentenceCount,omitempty"`
	AdditionalContext    string     `json:"additionalContext,omitempty"`
}

// MemoryTrace (type 14) shows a memory the assistant used or changed.
type MemoryTrace struct {
	ID             string         `json:"id"`
	ConversationID string         `json:"conversationId"`
	PreviousID     string         `json:"previousId"`
	MemoryID       string         `json:"memoryId"`
	MemoryType     string         `json:"memoryType,omitempty"`
	Action         MemoryAction   `json:"action"`
	Content        string         `json:"content"`
	Confidence     *float64       `json:"confidence,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
}

// Commentary (type 15) is feedback or a note about a message.
type Commentary struct {
	ID             string      `json:"id"`
	ConversationID string      `json:"conversationId"`
	TargetID       string      `json:"targetId"`
	AuthorRole     AuthorRole  `json:"authorRole"`
	Content        string      `json:"content"`
	Rating         int32       `json:"rating,omitempty"`
	CommentType    CommentType `json:"commentType,omitempty"`
	Timestamp      int64       `json:"timestamp,omitempty"`
}

// AssistantSentence (type 16) is one sentence of a streamed answer.
// PreviousID is the StartAnswer's ID for every sentence; Sequence counts
// from 1 and the last sentence has IsFinal set. A sentence goes out on the
// token that ends it, before the model has said whether more follows, so
// the final one is often empty: it only closes the answer.
type AssistantSentence struct {
	ID             string `json:"id,omitempty"`
	PreviousID     string `json:"previousId"`
	ConversationID string `json:"conversationId"`
	Sequence       int32  `json:"sequence"`
	Text           string `json:"text"`
	Audio          []byte `json:"audio,omitempty"`
	IsFinal        bool   `json:"isFinal,omitempty"`
	Sentiment      string `json:"sentiment,omitempty"`
	Tone           string `json:"tone,omitempty"`
	// Markdown lists what the text holds that must not be read aloud
	// (Alicia's addition): "code" (a span or fence to skip) and "emphasis"
	// (markers to strip). The text keeps them for display.
	Markdown []string `json:"markdown,omitempty"`
}

// Markdown kinds flagged on AssistantSentence.
const (
	MarkdownCode     = "code"
	MarkdownEmphasis = "emphasis"
)
