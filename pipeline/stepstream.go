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
