package reasoning

import (
	"encoding/json"
	"time"

	"github.com/alicia-voice/alicia/wire"
	"github.com/alicia-voice/alicia/wire/agui"
)

// AGUIEvents is the AG-UI face of a Chain: one reasoning message per
// step, with the step's id, inside a REASONING_START/END span per stretch
// of reasoning. In full mode a step streams as it grows; in summary mode
// its first sentence is sent when it closes; off sends nothing. It never
// emits an empty delta, and closes everything it opens once the Chain
// ends its phase.
type AGUIEvents struct {
	mode    Mode
	emit    func(agui.Event)
	span    string
	started map[string]bool
}

// NewAGUIEvents emits through emit what a client in mode should see.
func NewAGUIEvents(mode Mode, emit func(agui.Event)) *AGUIEvents {
	return &AGUIEvents{mode: mode, emit: emit, started: map[string]bool{}}
}

func (a *AGUIEvents) ev(e agui.Event, now time.Time) {
	e.Timestamp = now.UnixMilli()
	a.emit(e)
}

func (a *AGUIEvents) openSpan(now time.Time) {
	if a.span == "" {
		a.span = wire.NewID("rsp")
		a.ev(agui.Event{Type: agui.ReasoningStart, MessageID: a.span}, now)
	}
}

func (a *AGUIEvents) StepOpened(s *Step, now time.Time) {
	if a.mode != ModeFull {
		return
	}
	a.openSpan(now)
	a.started[s.ID] = true
	a.ev(agui.Event{Type: agui.ReasoningMessageStart, MessageID: s.ID, Role: "reasoning"}, now)
	a.ev(agui.Event{Type: agui.ReasoningMessageContent, MessageID: s.ID, Delta: s.Content}, now)
}

func (a *AGUIEvents) StepGrew(s *Step, delta string, now time.Time) {
	if a.mode == ModeFull && delta != "" {
		a.ev(agui.Event{Type: agui.ReasoningMessageContent, MessageID: s.ID, Delta: delta}, now)
	}
}

func (a *AGUIEvents) StepClosed(s *Step, now time.Time) {
	switch a.mode {
	case ModeFull:
		a.ev(agui.Event{Type: agui.ReasoningMessageEnd, MessageID: s.ID}, now)
	case ModeSummary:
		a.openSpan(now)
		a.started[s.ID] = true
		a.ev(agui.Event{Type: agui.ReasoningMessageStart, MessageID: s.ID, Role: "reasoning"}, now)
		a.ev(agui.Event{Type: agui.ReasoningMessageContent, MessageID: s.ID, Delta: Summarize(s.Content)}, now)
		a.ev(agui.Event{Type: agui.ReasoningMessageEnd, MessageID: s.ID}, now)
		if s.EncryptedValue != "" {
			a.StepEncrypted(s, now)
		}
	}
	if s.CutShort && a.started[s.ID] {
		// AG-UI's reasoning events have no room for it; REASONING_END
		// follows when the chain ends its phase.
		value, _ := json.Marshal(map[string]string{"messageId": s.ID})
		a.ev(agui.Event{Type: agui.Custom, Name: agui.CustomReasoningCutShort, Value: value}, now)
	}
}

func (a *AGUIEvents) StepEncrypted(s *Step, now time.Time) {
	if a.started[s.ID] {
		a.ev(agui.Event{Type: agui.ReasoningEncryptedValue, Subtype: agui.SubtypeMessage, EntityID: s.ID, EncryptedValue: s.EncryptedValue}, now)
	}
}

func (a *AGUIEvents) StepSealed(*Step) {}

func (a *AGUIEvents) PhaseEnded(now time.Time) {
	if a.span != "" {
		a.ev(agui.Event{Type: agui.ReasoningEnd, MessageID: a.span}, now)
		a.span = ""
	}
}
