package pipeline

import (
	"context"
	"errors"
	"time"
)

// The model's stages of a turn, as metrics and traces name them.
const (
	// StageModelFirstToken: the turn asked → the model's first token,
	// of reasoning or of the answer.
	StageModelFirstToken = "model_first_token"
	// StageFirstSentence: the turn asked → the answer's first sentence.
	StageFirstSentence = "first_sentence"
)

// Timed is one stage of a turn, from Start to End.
type Timed struct {
	Name       string
	Start, End time.Time
	// Attrs say more about it, for its span.
	Attrs map[string]string
}

// TurnReport is what one turn took, reported once it is over: the model
// done and, when speech played it, the speech too.
type TurnReport struct {
	ConversationID, UserMessageID, AnswerID string
	Spoken, Interrupted                     bool
	// Preemptive: the turn began, held, before the end of the user's
	// speech was confirmed, and was used (Conversation.Preempt).
	Preemptive bool
	// Start and End bound the turn's stages and its asking.
	Start, End time.Time
	Stages     []Timed
}

// TurnObserver hears every turn's report, for metrics and traces.
// TurnEnded is called on whichever goroutine finished the turn last (the
// conversation's or speech's) and must return at once.
type TurnObserver interface {
	TurnEnded(r TurnReport)
}

// Timing is a turn's model timings so far; a zero time has not come yet.
type Timing struct {
	// Asked is when the turn was asked: the typed message received, or
	// Ask called with a final transcript. Requested is when its first
	// request went to the model: from Asked to it is the engine's own
	// work (history, prompt), not the model's.
	Asked, Requested, FirstToken, FirstSentence time.Time
}

// Timing returns the turn's model timings so far.
func (t *Turn) Timing() Timing {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.timing
}

// Measure holds the turn's report until the returned func is called
// (once; later calls do nothing) with the caller's own stages: speech
// times what happens around the model (the user's speech before the
// turn, the audio after it), and those stages belong to the same turn.
// interrupted says the caller cut the answer short.
func (t *Turn) Measure() (report func(interrupted bool, stages ...Timed)) {
	t.mu.Lock()
	t.holds++
	t.mu.Unlock()
	var done bool
	return func(interrupted bool, stages ...Timed) {
		t.mu.Lock()
		if done {
			t.mu.Unlock()
			return
		}
		done = true
		t.holds--
		t.extra = append(t.extra, stages...)
		t.interrupted = t.interrupted || interrupted
		r := t.reportLocked()
		t.mu.Unlock()
		if r != nil {
			t.observer.TurnEnded(*r)
		}
	}
}

// observe makes the turn report to o, as part of conversation conv.
func (t *Turn) observe(conv string, o TurnObserver) {
	t.mu.Lock()
	t.conv, t.observer = conv, o
	t.mu.Unlock()
}

// turnKey finds the running turn in its context: the model rounds are
// shared by every backend and face, and reach the model's stream without
// the turn; its first token is timed there.
type turnKey struct{}

// tokenAt records the model's first token of the turn ctx belongs to.
func tokenAt(ctx context.Context, now time.Time) {
	timeFirst(ctx, now, func(tm *Timing) *time.Time { return &tm.FirstToken })
}

// requestedAt records the turn's first request to the model.
func requestedAt(ctx context.Context, now time.Time) {
	timeFirst(ctx, now, func(tm *Timing) *time.Time { return &tm.Requested })
}

// timeFirst sets the time field picks of the turn ctx belongs to, unless
// it is set already.
func timeFirst(ctx context.Context, now time.Time, pick func(*Timing) *time.Time) {
	t, _ := ctx.Value(turnKey{}).(*Turn)
	if t == nil {
		return
	}
	t.mu.Lock()
	if at := pick(&t.timing); at.IsZero() {
		*at = now
	}
	t.mu.Unlock()
}

// reportLocked returns the turn's report once the turn has ended and no
// one holds it, and only once; nil otherwise. Called with mu held.
func (t *Turn) reportLocked() *TurnReport {
	if t.observer == nil || t.reported || !t.ended || t.holds > 0 || t.discarded {
		return nil
	}
	t.reported = true
	r := &TurnReport{ConversationID: t.conv, UserMessageID: t.userMessageID, AnswerID: t.answerID, Spoken: t.spec.spoken, Preemptive: t.hold != nil,
		Interrupted: t.interrupted || t.heard != nil, Start: t.timing.Asked, End: t.endedAt}
	if !t.timing.FirstToken.IsZero() {
		r.Stages = append(r.Stages, Timed{Name: StageModelFirstToken, Start: t.timing.Asked, End: t.timing.FirstToken})
	}
	if !t.timing.FirstSentence.IsZero() {
		r.Stages = append(r.Stages, Timed{Name: StageFirstSentence, Start: t.timing.Asked, End: t.timing.FirstSentence})
	}
	r.Stages = append(r.Stages, t.extra...)
	for _, s := range r.Stages {
		if s.Start.Before(r.Start) {
			r.Start = s.Start
		}
		if s.End.After(r.End) {
			r.End = s.End
		}
	}
	return r
}

// ended records the end of the turn for its report, and whether the
// user stopped it; it returns the report if no one holds it. Called
// with mu held, before the turn's context is cancelled.
func (t *Turn) endedLocked(now time.Time) *TurnReport {
	t.endedAt = now
	if errors.Is(context.Cause(t.ctx), errStopped) {
		t.interrupted = true
	}
	return t.reportLocked()
}
