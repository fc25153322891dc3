package pipeline

import (
	"slices"

	"github.com/alicia-voice/alicia/reasoning"
)

// StepStreamer is implemented by a face that can carry each reasoning
// step as a stream to the members that read them (LiveKit text streams).
// It must not block, like Outbox.
type StepStreamer interface {
	StreamStep(p reasoning.StreamPart)
}

// deliverer decides who sees a turn's steps, in which form: ReasoningStep
// envelopes for the members that speak the Alicia protocol, streams for
// those that read them, when the face carries streams.
func (c *Conversation) deliverer(face Face) *reasoning.Deliverer {
	d := reasoning.NewDeliverer(func() []reasoning.Viewer { return c.viewers(face) },
		func(d reasoning.Delivery) { face.Send(d.Step, d.To...) })
	if ss, ok := face.(StepStreamer); ok {
		d.StreamTo(ss.StreamStep)
	}
	return d
}

// StreamStep holds a held turn's step streams like its sends: a turn
// started in the speaker's pause shows its reasoning once it is asked.
func (f heldFace) StreamStep(p reasoning.StreamPart) {
	ss, ok := f.Face.(StepStreamer)
	if !ok {
		return
	}
	p.To = slices.Clone(p.To)
	f.h.do(func() { ss.StreamStep(p) })
}
