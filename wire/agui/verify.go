package agui

import (
	"fmt"
	"slices"
)

// Verifier applies, event by event, the sequencing rules @ag-ui/client
// 1.0.0 enforces in verifyEvents, plus two it does not check but older
// clients or Alicia's own contract need: no empty delta (fatal in clients
// 0.0.45–0.0.50) and a stream that ends with a terminal event.
type Verifier struct {
	started, finished, errored bool
	text, tools, reasoning     map[string]bool
	spans, steps               map[string]bool
	events                     int
}

// NewVerifier returns a checker for one stream.
func NewVerifier() *Verifier {
	v := &Verifier{}
	v.reset()
	return v
}

func (v *Verifier) reset() {
	v.text, v.tools, v.reasoning = map[string]bool{}, map[string]bool{}, map[string]bool{}
	v.spans, v.steps = map[string]bool{}, map[string]bool{}
}

// Check returns the error the client would raise for ev, or nil.
func (v *Verifier) Check(ev *Event) error {
	v.events++
	if err := v.checkOrder(ev.Type); err != nil {
		return err
	}
	if err := checkFields(ev); err != nil {
		return err
	}
	switch ev.Type {
	case RunStarted:
		return v.startRun()
	case RunFinished:
		return v.finishRun()
	case RunError:
		v.errored = true
		return nil
	}
	return v.track(ev)
}

// checkOrder applies the rules on where an event may come in the stream:
// it begins with a run or its error, and once a run has ended only a new
// run may begin (or, after RUN_FINISHED, an error come).
func (v *Verifier) checkOrder(typ EventType) error {
	if v.events == 1 && typ != RunStarted && typ != RunError {
		return fmt.Errorf("first event must be RUN_STARTED, got %s", typ)
	}
	if v.errored && typ != RunStarted {
		return fmt.Errorf("%s after RUN_ERROR", typ)
	}
	if v.finished && typ != RunStarted && typ != RunError {
		return fmt.Errorf("%s after RUN_FINISHED", typ)
	}
	return nil
}

// checkFields applies the rules on an event's own fields. They come
// before tracking, so that an event they refuse opens nothing.
func checkFields(ev *Event) error {
	switch ev.Type {
	case TextMessageContent, ToolCallArgs, ReasoningMessageContent:
		if ev.Delta == "" {
			return fmt.Errorf("%s with an empty delta", ev.Type)
		}
	case ReasoningMessageStart:
		if ev.Role != "reasoning" {
			return fmt.Errorf("REASONING_MESSAGE_START role %q, must be \"reasoning\"", ev.Role)
		}
	case ReasoningEncryptedValue:
		if ev.Subtype != SubtypeMessage && ev.Subtype != SubtypeToolCall {
			return fmt.Errorf("REASONING_ENCRYPTED_VALUE subtype %q", ev.Subtype)
		}
	}
	return nil
}

// startRun begins a run, with nothing open, unless one is still going.
func (v *Verifier) startRun() error {
	if v.started && !v.finished && !v.errored {
		return fmt.Errorf("RUN_STARTED while a run is still active")
	}
	v.started, v.finished, v.errored = true, false, false
	v.reset()
	return nil
}

// finishRun ends a run, which must have closed everything it opened.
func (v *Verifier) finishRun() error {
	for what, set := range map[string]map[string]bool{"steps": v.steps, "text messages": v.text, "tool calls": v.tools,
		"reasoning messages": v.reasoning, "reasoning spans": v.spans} {
		if len(set) > 0 {
			return fmt.Errorf("RUN_FINISHED while %s are still active: %v", what, keys(set))
		}
	}
	v.finished = true
	return nil
}

// itemKind is one kind of item a run opens, adds to and closes by id:
// what the client's errors call it, and the events that open and close
// one.
type itemKind struct {
	what       string
	start, end EventType
}

var (
	textMessage      = itemKind{"text message", TextMessageStart, TextMessageEnd}
	toolCall         = itemKind{"tool call", ToolCallStart, ToolCallEnd}
	reasoningSpan    = itemKind{"reasoning span", ReasoningStart, ReasoningEnd}
	reasoningMessage = itemKind{"reasoning message", ReasoningMessageStart, ReasoningMessageEnd}
	step             = itemKind{"step", StepStarted, StepFinished}
)

// track follows the item ev names, if any, in the set of its kind's open
// items.
func (v *Verifier) track(ev *Event) error {
	switch ev.Type {
	case TextMessageStart, TextMessageContent, TextMessageEnd:
		return textMessage.advance(v.text, ev.MessageID, ev.Type)
	case ToolCallStart, ToolCallArgs, ToolCallEnd:
		return toolCall.advance(v.tools, ev.ToolCallID, ev.Type)
	case ReasoningStart, ReasoningEnd:
		return reasoningSpan.advance(v.spans, ev.MessageID, ev.Type)
	case ReasoningMessageStart, ReasoningMessageContent, ReasoningMessageEnd:
		return reasoningMessage.advance(v.reasoning, ev.MessageID, ev.Type)
	case StepStarted, StepFinished:
		return step.advance(v.steps, ev.StepName, ev.Type)
	}
	return nil
}

// advance applies an event of kind k to the item id among the open ones:
// its start must find it not open yet, any other event must find it open,
// and its end closes it.
func (k itemKind) advance(open map[string]bool, id string, typ EventType) error {
	if typ == k.start {
		if open[id] {
			return fmt.Errorf("%s %q is already in progress", k.what, id)
		}
		open[id] = true
		return nil
	}
	if !open[id] {
		return fmt.Errorf("%s: no active %s with id %q", typ, k.what, id)
	}
	if typ == k.end {
		delete(open, id)
	}
	return nil
}

// End reports a stream that stopped without RUN_FINISHED or RUN_ERROR,
// which no client detects.
func (v *Verifier) End() error {
	if !v.finished && !v.errored {
		return fmt.Errorf("the stream ended without RUN_FINISHED or RUN_ERROR")
	}
	return nil
}

// CheckAll runs a whole stream through a new Verifier.
func CheckAll(events []Event) error {
	v := NewVerifier()
	for i := range events {
		if err := v.Check(&events[i]); err != nil {
			return fmt.Errorf("event %d: %w", i+1, err)
		}
	}
	return v.End()
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
