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
	if v.events == 1 && ev.Type != RunStarted && ev.Type != RunError {
		return fmt.Errorf("first event must be RUN_STARTED, got %s", ev.Type)
	}
	if v.errored && ev.Type != RunStarted {
		return fmt.Errorf("%s after RUN_ERROR", ev.Type)
	}
	if v.finished && ev.Type != RunStarted && ev.Type != RunError {
		return fmt.Errorf("%s after RUN_FINISHED", ev.Type)
	}
	switch ev.Type {
	case TextMessageContent, ToolCallArgs, ReasoningMessageContent:
		if ev.Delta == "" {
			return fmt.Errorf("%s with an empty delta", ev.Type)
		}
	}
	open := func(set map[string]bool, id, what string) error {
		if set[id] {
			return fmt.Errorf("%s %q is already in progress", what, id)
		}
		set[id] = true
		return nil
	}
	need := func(set map[string]bool, id, what string) error {
		if !set[id] {
			return fmt.Errorf("%s: no active %s with id %q", ev.Type, what, id)
		}
		return nil
	}
	switch ev.Type {
	case RunStarted:
		if v.started && !v.finished && !v.errored {
			return fmt.Errorf("RUN_STARTED while a run is still active")
		}
		v.started, v.finished, v.errored = true, false, false
		v.reset()
	case RunFinished:
		for what, set := range map[string]map[string]bool{"steps": v.steps, "text messages": v.text, "tool calls": v.tools,
			"reasoning messages": v.reasoning, "reasoning spans": v.spans} {
			if len(set) > 0 {
				return fmt.Errorf("RUN_FINISHED while %s are still active: %v", what, keys(set))
			}
		}
		v.finished = true
	case RunError:
		v.errored = true
	case TextMessageStart:
		return open(v.text, ev.MessageID, "text message")
	case TextMessageContent:
		return need(v.text, ev.MessageID, "text message")
	case TextMessageEnd:
		if err := need(v.text, ev.MessageID, "text message"); err != nil {
			return err
		}
		delete(v.text, ev.MessageID)
	case ToolCallStart:
		return open(v.tools, ev.ToolCallID, "tool call")
	case ToolCallArgs:
		return need(v.tools, ev.ToolCallID, "tool call")
	case ToolCallEnd:
		if err := need(v.tools, ev.ToolCallID, "tool call"); err != nil {
			return err
		}
		delete(v.tools, ev.ToolCallID)
	case ReasoningStart:
		return open(v.spans, ev.MessageID, "reasoning span")
	case ReasoningEnd:
		if err := need(v.spans, ev.MessageID, "reasoning span"); err != nil {
			return err
		}
		delete(v.spans, ev.MessageID)
	case ReasoningMessageStart:
		if ev.Role != "reasoning" {
			return fmt.Errorf("REASONING_MESSAGE_START role %q, must be \"reasoning\"", ev.Role)
		}
		return open(v.reasoning, ev.MessageID, "reasoning message")
	case ReasoningMessageContent:
		return need(v.reasoning, ev.MessageID, "reasoning message")
	case ReasoningMessageEnd:
		if err := need(v.reasoning, ev.MessageID, "reasoning message"); err != nil {
			return err
		}
		delete(v.reasoning, ev.MessageID)
	case ReasoningEncryptedValue:
		if ev.Subtype != SubtypeMessage && ev.Subtype != SubtypeToolCall {
			return fmt.Errorf("REASONING_ENCRYPTED_VALUE subtype %q", ev.Subtype)
		}
	case StepStarted:
		return open(v.steps, ev.StepName, "step")
	case StepFinished:
		if err := need(v.steps, ev.StepName, "step"); err != nil {
			return err
		}
		delete(v.steps, ev.StepName)
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
