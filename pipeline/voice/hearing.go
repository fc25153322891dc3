package voice

import (
	"context"
	"time"
)

// hearing is what a speaker's listener reports to the stage, one call
// per event of an utterance, in the order they happen. The listener
// only reports; whether talk over the agent pauses, stops or resumes it,
// and whether a transcript asks anything, the stage decides
// (interrupt.go). LiveKit Agents splits its AudioRecognition from its
// AgentActivity by the same line.
type hearing interface {
	// startOfSpeech: the speaker's utterance id began, its voice at at.
	// It may yet prove to be noise.
	startOfSpeech(speaker, id string, at time.Time)
	// speechConfirmed: the utterance is speech, not noise (its voice has
	// pitch, or went on as long as no cough does).
	speechConfirmed(id string)
	// longSpeech: the utterance has lasted MinInterruption.
	longSpeech(id string)
	// interimTranscript: the utterance, still under way or being
	// recognised, was heard so far as text.
	interimTranscript(id, text string)
	// endOfSpeech: the utterance's voice ended, at the times heard gives.
	endOfSpeech(id string, heard heardAt)
	// finalTranscript: the utterance was recognised as text ("" for
	// nothing), recognised at at. It returns the question the speaker
	// asks with it (no id when none); false when the stage is gone.
	finalTranscript(ctx context.Context, id, speaker, text string, at time.Time) (question, bool)
}

// loopHearing hands a listener's reports to the stage's loop, which owns
// the decisions. Each report is posted without waiting, so that the
// stage never holds up a speaker's voice activity detection; only the
// final transcript waits for its verdict, on the recognition's own
// goroutine.
type loopHearing struct{ s *Stage }

var _ hearing = loopHearing{}

func (h loopHearing) startOfSpeech(speaker, id string, at time.Time) {
	h.s.post(func(l *loop) { l.onset(speaker, id, at) })
}

func (h loopHearing) speechConfirmed(id string) {
	h.s.post(func(l *loop) { l.confirmed(id) })
}

func (h loopHearing) longSpeech(id string) {
	h.s.post(func(l *loop) { l.longSpeech(id) })
}

func (h loopHearing) interimTranscript(id, text string) {
	if hasWords(text) {
		h.s.post(func(l *loop) { l.words(id) })
	}
}

func (h loopHearing) endOfSpeech(id string, heard heardAt) {
	h.s.post(func(l *loop) { l.speechEnded(id, heard) })
}

func (h loopHearing) finalTranscript(ctx context.Context, id, speaker, text string, at time.Time) (question, bool) {
	return ask(ctx, h.s, func(l *loop) question { return l.recognised(id, speaker, text, at) })
}
