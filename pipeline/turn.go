package pipeline

import (
	"context"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/wire"
)

// Sentence is one complete sentence of an answer, as the faces and speech
// consume it.
type Sentence struct {
	// Sequence counts from 1 within the answer.
	Sequence int32
	Text     string
	// Markdown flags what speech must skip or strip (wire.Markdown*).
	Markdown []string

	retracted chan struct{}
}

// Retracted is closed when the answer takes the sentence back: it was
// reasoning streamed as answer (NoteRetracted). Speech drops what it has
// not played of it. A sentence that is not a Turn's has none: never
// closed.
func (s Sentence) Retracted() <-chan struct{} { return s.retracted }

func (s Sentence) isRetracted() bool {
	select {
	case <-s.retracted:
		return true
	default:
		return false
	}
}

// HasCode and HasEmphasis read the splitter's markdown flags: code is
// skipped when spoken, emphasis markers stripped.
func (s Sentence) HasCode() bool     { return slices.Contains(s.Markdown, wire.MarkdownCode) }
func (s Sentence) HasEmphasis() bool { return slices.Contains(s.Markdown, wire.MarkdownEmphasis) }

// Heard is how much of an answer cut short reached the user's ears.
type Heard struct {
	// Text is what was played, to the word: the answer as it is kept,
	// and as the model sees it in later turns. Speech leaves out the words
	// of retracted sentences (Sentence.Retracted): they were reasoning.
	Text string
	// Played and Total are the answer's audio played and synthesised.
	Played, Total time.Duration
}

// Turn is the handle of one answer: it can be interrupted, awaited, and
// read as a stream of sentences. The conversation's goroutine starts it;
// anyone may hold it.
type Turn struct {
	// answerID is the assistant message id; userMessageID the message it
	// answers (AnswerID, UserMessageID).
	answerID, userMessageID string
	// From is the identity that asked.
	From string

	face   Face
	spec   spec
	prev   *Turn
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu        sync.Mutex
	sentences []Sentence
	ended     bool
	grew      chan struct{} // closed and replaced when a sentence is added
	speaking  int           // speech consumers playing this turn
	hushed    chan struct{} // closed by Interrupt(speech)
	generated bool          // the model is done (or was stopped)
	// heard is what speech played of an answer it cut short; saved says
	// the answer is stored already, so that a later heard re-saves it.
	heard     *Heard
	saved     bool
	lateHeard func(h Heard)
	// superseded: a turn on the same message, asked again whole, replaces
	// this one.
	superseded bool
	// hold keeps what a preemptive turn does until it is confirmed (nil:
	// not preemptive); unheld lets its report go once it is; discarded
	// says it never was, and is never reported.
	hold      *hold
	unheld    func(interrupted bool, stages ...Timed)
	discarded bool

	// For the turn's report (Measure, TurnObserver).
	timing      Timing
	conv        string
	observer    TurnObserver
	holds       int
	extra       []Timed
	interrupted bool
	reported    bool
	endedAt     time.Time
}

func newTurn(parent context.Context, face Face, sp spec, prev *Turn) *Turn {
	t := &Turn{answerID: wire.NewID("am"), userMessageID: sp.user.ID, From: sp.from, face: face, spec: sp, prev: prev,
		done: make(chan struct{}), grew: make(chan struct{}), hushed: make(chan struct{})}
	t.timing.Asked = sp.received
	if t.timing.Asked.IsZero() {
		t.timing.Asked = time.Now()
	}
	t.ctx, t.cancel = context.WithCancelCause(context.WithValue(parent, turnKey{}, t))
	return t
}

// Preemptive reports whether the turn began, held, before the end of
// the user's speech was confirmed (Conversation.Preempt).
func (t *Turn) Preemptive() bool { return t.hold != nil }

// UserMessageID is the id of the user message the turn answers: speech
// names the answer's transcript segment after it.
func (t *Turn) UserMessageID() string { return t.userMessageID }

// AnswerID is the id of the assistant message the turn writes: speech
// names it on the answer's transcript, since a segment named after the
// user message is shared by every answer to that message (regenerations).
func (t *Turn) AnswerID() string { return t.answerID }

// Done is closed when the turn is over: the model stopped, the answer
// and its status are sent and saved.
func (t *Turn) Done() <-chan struct{} { return t.done }

// Interrupt stops the turn: StopGeneration stops the model (what was said
// is kept, marked stopped), StopSpeech tells speech consumers to go quiet
// (SpeechInterrupted), StopAll does both. It does not wait: use Done. It
// reports whether there was anything to stop.
func (t *Turn) Interrupt(kind wire.StopType) bool {
	stopped := false
	if kind == wire.StopGeneration || kind == wire.StopAll {
		t.mu.Lock()
		running := !t.generated
		t.mu.Unlock()
		if running {
			t.cancel(errStopped)
			stopped = true
		}
	}
	if kind == wire.StopSpeech || kind == wire.StopAll {
		t.mu.Lock()
		if t.speaking > 0 {
			select {
			case <-t.hushed:
			default:
				close(t.hushed)
				stopped = true
			}
		}
		t.mu.Unlock()
	}
	return stopped
}

// Speak marks a speech consumer as playing this turn until done is
// called; SpeechInterrupted tells it to stop. Interrupt(StopSpeech)
// reports true only while someone speaks.
func (t *Turn) Speak() (done func()) {
	t.mu.Lock()
	t.speaking++
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			t.speaking--
			t.mu.Unlock()
		})
	}
}

// SpeechInterrupted is closed by Interrupt(StopSpeech or StopAll).
func (t *Turn) SpeechInterrupted() <-chan struct{} { return t.hushed }

// Sentences yields the answer's sentences in order as each completes,
// from the first, and ends with the answer (or when ctx ends). Any number
// of consumers may read it, each at its own pace. A sentence retracted
// before a consumer reaches it is skipped.
func (t *Turn) Sentences(ctx context.Context) iter.Seq[Sentence] {
	return func(yield func(Sentence) bool) {
		for i := 0; ; i++ {
			t.mu.Lock()
			for i >= len(t.sentences) && !t.ended {
				grew := t.grew
				t.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-grew:
				}
				t.mu.Lock()
			}
			if i >= len(t.sentences) {
				t.mu.Unlock()
				return
			}
			s := t.sentences[i]
			t.mu.Unlock()
			if s.isRetracted() {
				continue
			}
			if !yield(s) {
				return
			}
		}
	}
}

// Heard records what the user heard of the answer when speech was cut
// short: the stored assistant message keeps only that, marked stopped,
// and later turns show the model only that, as LiveKit Agents truncates
// its chat context to what was played.
func (t *Turn) Heard(h Heard) {
	t.mu.Lock()
	t.heard = &h
	late := t.lateHeard
	if !t.saved {
		late = nil
	}
	t.mu.Unlock()
	if late != nil {
		late(h)
	}
}

// takeHeard marks the answer as being saved and returns what was heard,
// if speech cut it short before; a later Heard calls late.
func (t *Turn) takeHeard(late func(h Heard)) *Heard {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.saved, t.lateHeard = true, late
	return t.heard
}

func (t *Turn) addSentence(s Sentence) {
	s.retracted = make(chan struct{})
	t.mu.Lock()
	t.sentences = append(t.sentences, s)
	if t.timing.FirstSentence.IsZero() {
		t.timing.FirstSentence = time.Now()
	}
	close(t.grew)
	t.grew = make(chan struct{})
	t.mu.Unlock()
}

// retract takes back the sentences of sequence seq: consumers skip them
// from now on, and speech drops their audio not played yet.
func (t *Turn) retract(seq []int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.sentences {
		if slices.Contains(seq, s.Sequence) && !s.isRetracted() {
			close(s.retracted)
		}
	}
}

func (t *Turn) supersede() {
	t.mu.Lock()
	t.superseded = true
	t.mu.Unlock()
}

func (t *Turn) isSuperseded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.superseded
}

// generationEnded marks the model done: from now on a generation stop has
// nothing to stop.
func (t *Turn) generationEnded() {
	t.mu.Lock()
	t.generated = true
	t.mu.Unlock()
}

func (t *Turn) end() {
	t.mu.Lock()
	t.ended, t.generated = true, true
	close(t.grew)
	r := t.endedLocked(time.Now())
	t.mu.Unlock()
	t.cancel(nil)
	if r != nil {
		// Before Done: whoever waits for the turn finds it reported.
		t.observer.TurnEnded(*r)
	}
	close(t.done)
}
