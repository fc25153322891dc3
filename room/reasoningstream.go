package room

import (
	"strconv"

	"github.com/alicia-voice/alicia/reasoning"
)

// ReasoningTopic is the text-stream topic of reasoning steps, for
// clients that read LiveKit's conventions rather than the Alicia
// protocol: one stream per step, written as the step grows and closed
// when it is final, with the step's identity in its attributes.
const ReasoningTopic = "alicia.reasoning"

// AttrReasoningStreams is the participant attribute by which a client
// says it reads ReasoningTopic ("1"). Nobody else is sent a stream, so
// an app that does not read them pays nothing.
const AttrReasoningStreams = "alicia.reasoning_streams"

// The attributes of a reasoning stream's header; AttrAnswerID names the
// answer the step belongs to. AttrCutShort is in the trailer too.
const (
	AttrStepID         = "alicia.step_id"
	AttrStepIndex      = "alicia.step_index"
	AttrPreviousID     = "alicia.previous_id"
	AttrCutShort       = "alicia.cut_short"
	AttrReasoningLevel = "alicia.reasoning_level"
)

// reasoningStreams is the session's side of the reasoning streams: who
// reads them (under ownerMu) and the streams open now (the writer's).
type reasoningStreams struct {
	readers map[string]bool
	open    map[string]*textStream
}

// noteReader records whether identity's client reads reasoning streams,
// from its attributes as a whole (an attribute removed means no).
// Called with the attributes of every arrival and change.
func (s *Session) noteReader(identity string, attrs map[string]string) {
	v := attrs[AttrReasoningStreams]
	reads := v != "" && v != "0" && v != "false"
	s.ownerMu.Lock()
	defer s.ownerMu.Unlock()
	if s.reasoning.readers == nil {
		s.reasoning.readers = map[string]bool{}
	}
	if reads {
		s.reasoning.readers[identity] = true
	} else {
		delete(s.reasoning.readers, identity)
	}
}

// readsStreams: under ownerMu.
func (s *Session) readsStreams(identity string) bool { return s.reasoning.readers[identity] }

// StreamStep implements pipeline.StepStreamer: the engine chose who gets
// the step at which level; the writer sends it, in order with the rest.
func (s *Session) StreamStep(p reasoning.StreamPart) {
	if len(p.To) == 0 {
		return // an empty destination would mean everyone
	}
	s.post(func() { s.writeStep(p) })
}

func (s *Session) writeStep(p reasoning.StreamPart) {
	r := &s.reasoning
	if r.open == nil {
		r.open = map[string]*textStream{}
	}
	key := p.StepID + "/" + string(p.Level)
	st := r.open[key]
	if p.Open {
		var err error
		if st, err = openTextStream(s.out, ReasoningTopic, "", stepAttributes(p), false, p.To); err != nil {
			// The step's stream is lost; the next step opens its own.
			s.log.Warn("publishing a reasoning stream", "step", p.StepID, "err", err)
			return
		}
		r.open[key] = st
	}
	if st == nil {
		return
	}
	if p.Text != "" {
		if err := st.write(p.Text); err != nil {
			s.log.Warn("publishing a reasoning stream", "step", p.StepID, "err", err)
		}
	}
	if p.Close {
		delete(r.open, key)
		if err := st.end(map[string]string{AttrCutShort: strconv.FormatBool(p.CutShort)}); err != nil {
			s.log.Warn("closing a reasoning stream", "step", p.StepID, "err", err)
		}
	}
}

func stepAttributes(p reasoning.StreamPart) map[string]string {
	return map[string]string{
		AttrStepID:         p.StepID,
		AttrStepIndex:      strconv.Itoa(int(p.Index)),
		AttrPreviousID:     p.PreviousID,
		AttrAnswerID:       p.MessageID,
		AttrCutShort:       strconv.FormatBool(p.CutShort),
		AttrReasoningLevel: string(p.Level),
	}
}
