package wire

import "reflect"

// registry maps each type code to its body. Adding a message type is one
// line here plus its struct.
var registry = newRegistry(
	entry[ErrorMessage](TypeErrorMessage),
	entry[UserMessage](TypeUserMessage),
	entry[AssistantMessage](TypeAssistantMessage),
	entry[AudioChunk](TypeAudioChunk),
	entry[ReasoningStep](TypeReasoningStep),
	entry[ToolUseRequest](TypeToolUseRequest),
	entry[ToolUseResult](TypeToolUseResult),
	entry[Acknowledgement](TypeAcknowledgement),
	entry[Transcription](TypeTranscription),
	entry[ControlStop](TypeControlStop),
	entry[ControlVariation](TypeControlVariation),
	entry[Configuration](TypeConfiguration),
	entry[StartAnswer](TypeStartAnswer),
	entry[MemoryTrace](TypeMemoryTrace),
	entry[Commentary](TypeCommentary),
	entry[AssistantSentence](TypeAssistantSentence),
)

type bodyInfo struct {
	typ   Type
	name  string
	rtype reflect.Type
	plan  *structPlan
}

type bodyRegistry struct {
	byType  map[Type]*bodyInfo
	byRType map[reflect.Type]*bodyInfo
}

func entry[T any](t Type) *bodyInfo {
	rt := reflect.TypeFor[T]()
	return &bodyInfo{typ: t, name: rt.Name(), rtype: rt, plan: planFor(rt)}
}

func newRegistry(entries ...*bodyInfo) *bodyRegistry {
	r := &bodyRegistry{byType: map[Type]*bodyInfo{}, byRType: map[reflect.Type]*bodyInfo{}}
	for _, e := range entries {
		if r.byType[e.typ] != nil || r.byRType[e.rtype] != nil {
			panic("wire: type registered twice: " + e.name)
		}
		r.byType[e.typ] = e
		r.byRType[e.rtype] = e
	}
	return r
}

// Types lists every registered type code in ascending order.
func Types() []Type {
	out := make([]Type, 0, len(registry.byType))
	for t := Type(0); len(out) < len(registry.byType); t++ {
		if registry.byType[t] != nil {
			out = append(out, t)
		}
	}
	return out
}

// String is the message type's name, such as "ReasoningStep".
func (t Type) String() string {
	if e := registry.byType[t]; e != nil {
		return e.name
	}
	return "Type(" + itoa(int64(t)) + ")"
}

// Known reports whether t is a registered message type.
func (t Type) Known() bool { return registry.byType[t] != nil }

// NewBody returns a pointer to a zero body of type t, or nil if t is unknown.
func NewBody(t Type) Body {
	e := registry.byType[t]
	if e == nil {
		return nil
	}
	return reflect.New(e.rtype).Interface().(Body)
}

// TypeOf returns the type code of a body (a registered struct or a pointer
// to one).
func TypeOf(body any) (Type, bool) {
	e := infoOf(body)
	if e == nil {
		return 0, false
	}
	return e.typ, true
}

func infoOf(body any) *bodyInfo {
	rt := reflect.TypeOf(body)
	if rt != nil && rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	return registry.byRType[rt]
}
