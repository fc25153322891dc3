package wire

// Body is a message body: one of the registered body structs, or a
// pointer to one. The interface is sealed by an unexported method, so
// anything handed to a sender is known to encode.
type Body interface {
	wireBody()
}

func (ErrorMessage) wireBody()      {}
func (UserMessage) wireBody()       {}
func (AssistantMessage) wireBody()  {}
func (AudioChunk) wireBody()        {}
func (ReasoningStep) wireBody()     {}
func (ToolUseRequest) wireBody()    {}
func (ToolUseResult) wireBody()     {}
func (Acknowledgement) wireBody()   {}
func (Transcription) wireBody()     {}
func (ControlStop) wireBody()       {}
func (ControlVariation) wireBody()  {}
func (Configuration) wireBody()     {}
func (StartAnswer) wireBody()       {}
func (MemoryTrace) wireBody()       {}
func (Commentary) wireBody()        {}
func (AssistantSentence) wireBody() {}
