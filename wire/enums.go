package wire

// Type is the envelope's message type code.
type Type uint16

const (
	TypeErrorMessage      Type = 1
	TypeUserMessage       Type = 2
	TypeAssistantMessage  Type = 3
	TypeAudioChunk        Type = 4
	TypeReasoningStep     Type = 5
	TypeToolUseRequest    Type = 6
	TypeToolUseResult     Type = 7
	TypeAcknowledgement   Type = 8
	TypeTranscription     Type = 9
	TypeControlStop       Type = 10
	TypeControlVariation  Type = 11
	TypeConfiguration     Type = 12
	TypeStartAnswer       Type = 13
	TypeMemoryTrace       Type = 14
	TypeCommentary        Type = 15
	TypeAssistantSentence Type = 16
)

// Severity of an ErrorMessage.
type Severity int32

const (
	SeverityInfo     Severity = 0
	SeverityWarning  Severity = 1
	SeverityError    Severity = 2
	SeverityCritical Severity = 3
)

// Error codes of ErrorMessage: 1xx format and protocol, 2xx conversation,
// 3xx tool, 5xx server.
const (
	CodeMalformed            int32 = 101
	CodeUnknownType          int32 = 102
	CodeConversationNotFound int32 = 201
	CodeInvalidState         int32 = 202
	CodeToolNotFound         int32 = 301
	CodeToolTimeout          int32 = 304
	CodeInternal             int32 = 501
	CodeServiceUnavailable   int32 = 503
	CodeQueueFull            int32 = 504
)

// StopType says what a ControlStop stops; empty means StopGeneration.
type StopType string

const (
	StopGeneration StopType = "generation"
	StopSpeech     StopType = "speech"
	StopAll        StopType = "all"
)

// Execution says who runs a requested tool.
type Execution string

const (
	ExecutionServer Execution = "server"
	ExecutionClient Execution = "client"
	ExecutionEither Execution = "either"
)

// AnswerType of a StartAnswer.
type AnswerType string

const (
	AnswerText      AnswerType = "text"
	AnswerVoice     AnswerType = "voice"
	AnswerTextVoice AnswerType = "text+voice"
	AnswerVisual    AnswerType = "visual"
)

// VariationMode of a ControlVariation.
type VariationMode string

const (
	VariationEdit       VariationMode = "edit"
	VariationRegenerate VariationMode = "regenerate"
	VariationContinue   VariationMode = "continue"
)

// MemoryAction of a MemoryTrace.
type MemoryAction string

const (
	MemoryRetrieved MemoryAction = "retrieved"
	MemoryStored    MemoryAction = "stored"
	MemoryUpdated   MemoryAction = "updated"
)

// AuthorRole of a Commentary.
type AuthorRole string

const (
	AuthorUser      AuthorRole = "user"
	AuthorAssistant AuthorRole = "assistant"
	AuthorModerator AuthorRole = "moderator"
)

// CommentType of a Commentary.
type CommentType string

const (
	CommentFeedbackPositive CommentType = "feedback-positive"
	CommentFeedbackNegative CommentType = "feedback-negative"
	CommentExplanation      CommentType = "explanation"
	CommentNote             CommentType = "note"
	CommentCorrection       CommentType = "correction"
)

// Tool error codes carried in ToolUseResult.errorCode.
const (
	ToolErrUnknownTool       = "unknown_tool"
	ToolErrInvalidParameters = "invalid_parameters"
	ToolErrExecution         = "execution_error"
	ToolErrTimeout           = "timeout"
)
