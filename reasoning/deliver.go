package reasoning

import (
	"time"

	"github.com/alicia-voice/alicia/wire"
)

// Viewer is a participant of a room as the reasoning sees it.
type Viewer struct {
	Identity string
	Mode     Mode
	// Partial: the client announced partial_reasoning and receives a step
	// while it is being written.
	Partial bool
	// Streams: the client reads steps as text streams (StreamPart) and
	// gets no ReasoningStep packet; it takes every level, so Mode is the
	// user's preference itself.
	Streams bool
}

// Delivery is one ReasoningStep packet and the identities it goes to.
type Delivery struct {
	To   []string
	Step *wire.ReasoningStep
}

// PartialInterval is the shortest time between two partial updates of a
// step to one client.
const PartialInterval = 150 * time.Millisecond

// Deliverer is the LiveKit face of a Chain: it decides, for each step,
// who receives it and in which form, and hands the packets to send. The
// audience of a step is fixed when the step opens, so a preference changed
// mid-step applies from the next step on. A viewer whose mode is off is
// never addressed.
type Deliverer struct {
	viewers func() []Viewer
	send    func(Delivery)
	stream  func(StreamPart)
	open    map[string]*audience
}

type audience struct {
	step                        *Step
	fullPartial, fullFinal      []string
	summaryPartial, summaryLast []string
	lastPartial                 time.Time
	pending                     bool
	sentFull, sentSummary       string
	streams                     streamAudience
}

// NewDeliverer sends through send what viewers, asked at each step's
// start, should see.
func NewDeliverer(viewers func() []Viewer, send func(Delivery)) *Deliverer {
	return &Deliverer{viewers: viewers, send: send, open: map[string]*audience{}}
}

func (d *Deliverer) StepOpened(s *Step, now time.Time) {
	a := &audience{step: s}
	for _, v := range d.viewers() {
		if v.Streams {
			if d.stream != nil {
				a.streams.add(v)
			}
			continue
		}
		switch {
		case v.Mode == ModeFull && v.Partial:
			a.fullPartial = append(a.fullPartial, v.Identity)
		case v.Mode == ModeFull:
			a.fullFinal = append(a.fullFinal, v.Identity)
		case v.Mode == ModeSummary && v.Partial:
			a.summaryPartial = append(a.summaryPartial, v.Identity)
		case v.Mode == ModeSummary:
			a.summaryLast = append(a.summaryLast, v.Identity)
		}
	}
	d.open[s.ID] = a
	// The first words go out at once; later growth is throttled.
	d.openStreams(a, now)
	d.sendPartials(a, now)
}

func (d *Deliverer) StepGrew(s *Step, _ string, now time.Time) {
	a := d.open[s.ID]
	if a == nil || (len(a.fullPartial) == 0 && len(a.summaryPartial) == 0 && len(a.streams.full) == 0) {
		return
	}
	if now.Sub(a.lastPartial) >= PartialInterval {
		d.sendPartials(a, now)
		return
	}
	a.pending = true
}

// Poll sends the partial updates that have waited out the interval and
// returns when the next one is due (zero when none waits). The owner of
// the Chain calls it from its own loop.
func (d *Deliverer) Poll(now time.Time) time.Time {
	var next time.Time
	for _, a := range d.open {
		if !a.pending {
			continue
		}
		due := a.lastPartial.Add(PartialInterval)
		if !now.Before(due) {
			d.sendPartials(a, now)
			continue
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}

func (d *Deliverer) sendPartials(a *audience, now time.Time) {
	a.pending = false
	sent := d.flushStream(a)
	if len(a.fullPartial) > 0 && a.step.Content != a.sentFull {
		a.sentFull = a.step.Content
		d.send(Delivery{To: a.fullPartial, Step: body(a.step, a.step.Content, true)})
		sent = true
	}
	if len(a.summaryPartial) > 0 {
		if sum := Summarize(a.step.Content); sum != "" && sum != a.sentSummary {
			a.sentSummary = sum
			d.send(Delivery{To: a.summaryPartial, Step: body(a.step, sum, true)})
			sent = true
		}
	}
	if sent {
		a.lastPartial = now
	}
}

func (d *Deliverer) StepClosed(s *Step, _ time.Time) {
	a := d.open[s.ID]
	if a == nil {
		return
	}
	delete(d.open, s.ID)
	if to := concat(a.fullPartial, a.fullFinal); len(to) > 0 {
		d.send(Delivery{To: to, Step: body(s, s.Content, false)})
	}
	if to := concat(a.summaryPartial, a.summaryLast); len(to) > 0 {
		d.send(Delivery{To: to, Step: body(s, Summarize(s.Content), false)})
	}
	d.closeStreams(a, s)
}

func (d *Deliverer) StepEncrypted(*Step, time.Time) {}
func (d *Deliverer) StepSealed(*Step)               {}
func (d *Deliverer) PhaseEnded(time.Time)           {}

func body(s *Step, content string, partial bool) *wire.ReasoningStep {
	return &wire.ReasoningStep{ID: s.ID, ConversationID: s.ConversationID, PreviousID: s.PreviousID,
		Content: content, StepIndex: s.Index, Partial: partial, CutShort: s.CutShort}
}

func concat(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	return append(append(make([]string, 0, len(a)+len(b)), a...), b...)
}

// OnSealed is the storage face: a Listener that hands each step to store
// once, when it is sealed.
type OnSealed func(Step)

func (f OnSealed) StepOpened(*Step, time.Time)       {}
func (f OnSealed) StepGrew(*Step, string, time.Time) {}
func (f OnSealed) StepClosed(*Step, time.Time)       {}
func (f OnSealed) StepEncrypted(*Step, time.Time)    {}
func (f OnSealed) StepSealed(s *Step)                { f(*s) }
func (f OnSealed) PhaseEnded(time.Time)              {}
