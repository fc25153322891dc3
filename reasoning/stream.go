package reasoning

import "time"

// StreamPart is one piece of a step's text stream, for a client that
// reads reasoning as LiveKit text streams (one stream per step and level)
// rather than as ReasoningStep packets. The Deliverer decides who gets
// which level, the same decision as for packets; the face only writes.
// A stream is named by StepID and Level: the first part opens it, Text is
// appended, and the part with Close ends it.
type StreamPart struct {
	To                            []string
	Level                         Mode
	StepID, PreviousID, MessageID string
	Index                         int32
	CutShort                      bool
	Open, Close                   bool
	Text                          string
}

// StreamTo makes the Deliverer hand steps to viewers that read streams
// through send, as well as packets to the others.
func (d *Deliverer) StreamTo(send func(StreamPart)) { d.stream = send }

// streamAudience is who reads one step as streams, and how much of the
// full text went out.
type streamAudience struct {
	full, summary []string
	sent          int
}

func (st *streamAudience) add(v Viewer) {
	switch v.Mode {
	case ModeFull:
		st.full = append(st.full, v.Identity)
	case ModeSummary:
		st.summary = append(st.summary, v.Identity)
	}
}

func (d *Deliverer) streamPart(s *Step, to []string, level Mode) StreamPart {
	return StreamPart{To: to, Level: level, StepID: s.ID, PreviousID: s.PreviousID, MessageID: s.MessageID,
		Index: s.Index, CutShort: s.CutShort}
}

// openStreams starts the step's streams: the full one with the text so
// far, the summary one empty until the step is final (a summary is the
// step's first sentence, which may be cut differently once it ends).
func (d *Deliverer) openStreams(a *audience, now time.Time) {
	st := &a.streams
	if len(st.full) > 0 {
		p := d.streamPart(a.step, st.full, ModeFull)
		p.Open, p.Text = true, a.step.Content
		st.sent = len(a.step.Content)
		d.stream(p)
		a.lastPartial = now
	}
	if len(st.summary) > 0 {
		p := d.streamPart(a.step, st.summary, ModeSummary)
		p.Open = true
		d.stream(p)
	}
}

// flushStream appends what the full stream has not carried yet.
func (d *Deliverer) flushStream(a *audience) bool {
	st := &a.streams
	if len(st.full) == 0 || st.sent >= len(a.step.Content) {
		return false
	}
	p := d.streamPart(a.step, st.full, ModeFull)
	p.Text = a.step.Content[st.sent:]
	st.sent = len(a.step.Content)
	d.stream(p)
	return true
}

// closeStreams ends the step's streams: the full one with its last text,
// the summary one with its single line.
func (d *Deliverer) closeStreams(a *audience, s *Step) {
	st := &a.streams
	if len(st.full) > 0 {
		p := d.streamPart(s, st.full, ModeFull)
		p.Text, p.Close = s.Content[st.sent:], true
		d.stream(p)
	}
	if len(st.summary) > 0 {
		p := d.streamPart(s, st.summary, ModeSummary)
		p.Text, p.Close = Summarize(s.Content), true
		d.stream(p)
	}
}
