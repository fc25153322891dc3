package voice

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/speech"
)

// playback is one answer being spoken.
type playback struct {
	cancel context.CancelFunc
	turn   Turn

	mu      sync.Mutex
	written time.Duration
	spoken  []spokenSentence
	// released counts the sentences whose words have all gone out as the
	// agent's transcript; synthesised says every sentence is queued;
	// whole, that the answer was heard to its end and its transcript
	// closed final.
	released    int
	synthesised bool
	whole       bool
	// cue plays until the answer's first audio (nil when none plays).
	cue      cueSource
	answered bool
	// times is what the turn took, for its report; cut says the stage
	// stopped the answer. report is the turn's Measure.
	times  turnTimes
	cut    bool
	report func(interrupted bool, stages ...pipeline.Timed)
	// grew wakes the transcript when the answer's sentences change.
	grew chan struct{}
}

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// dropRetracted drops the audio not played yet of the sentences the
// answer took back: they were reasoning, and the model streams faster
// than speech plays, so seconds of it may be queued. A retraction takes
// back the answer's end, so their audio is the end of the queue. What
// was heard stays heard, in the transcript too. Called with mu held.
func (p *playback) dropRetracted(ctx context.Context, s *Stage) {
	first := len(p.spoken)
	for first > 0 && !p.spoken[first-1].cut && closed(p.spoken[first-1].retracted) {
		first--
	}
	// Once the answer is stopped its audio is someone else's to clear.
	if first == len(p.spoken) || ctx.Err() != nil {
		return
	}
	played := p.playedLocked(s.out)
	from := p.spoken[first].start
	s.out.Keep(max(0, from-played))
	p.written = max(from, played)
	for i := first; i < len(p.spoken); i++ {
		sp := &p.spoken[i]
		if sp.released == 0 {
			p.spoken = p.spoken[:i]
			break
		}
		// Begun before the retraction: its words heard stay released.
		sp.words, sp.at = sp.words[:sp.released], sp.at[:sp.released]
		sp.end, sp.done, sp.cut = max(sp.start, min(sp.end, played)), true, true
	}
}

// playedLocked is how much of the answer's audio the user has heard:
// what is still queued is the answer's end (the cue, if any, came
// before it). Called with mu held.
func (p *playback) playedLocked(out AudioOut) time.Duration {
	return max(0, p.written-out.Queued())
}

// interrupt clears the queued audio and says how much was heard, to the
// word: the words the agent's transcript released, so that the stored
// answer and the next turn's history say exactly what the user saw and
// heard begin (at most one transcript tick behind the audio).
// An answer heard whole is not cut: a turn that begins after its last
// word and before the stage heard that it ended only clears it (whole).
func (p *playback) interrupt(out AudioOut) (h pipeline.Heard, whole bool) {
	// Marked before the cancel that ends play, whose report says so.
	p.mu.Lock()
	whole = p.whole
	p.cut = !whole
	p.mu.Unlock()
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if whole {
		return h, true
	}
	played := p.playedLocked(out)
	out.Clear()
	h = pipeline.Heard{Played: played, Total: p.written}
	var words []string
	for i := range p.spoken {
		s := &p.spoken[i]
		if !closed(s.retracted) {
			// A retracted sentence was reasoning: not the answer heard.
			words = append(words, s.words[:s.released]...)
		}
	}
	h.Text = strings.Join(words, " ")
	return h, false
}

// play synthesises the turn's sentences one after another while the
// audio of the earlier ones plays: AudioOut queues and paces, so the
// next sentence is ready before the previous one has played out. The
// transcript follows the audio (transcribe).
func (s *Stage) play(ctx context.Context, p *playback, segmentID string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	tctx, stopTranscript := context.WithCancel(ctx)
	defer stopTranscript()
	transcribed := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(transcribed)
		s.transcribe(tctx, p, segmentID)
	}()
	for sent := range p.turn.Sentences(ctx) {
		text := Speakable(sent)
		if text == "" {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if !p.add(ctx, s, sent, text) {
			continue
		}
		if ch := sent.Retracted(); ch != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.dropOnRetraction(ctx, tctx, s, ch)
			}()
		}
		if !s.say(ctx, p, sent, text) {
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	p.synthesised = true
	p.grewLocked()
	p.mu.Unlock()
	// The transcript ends when the audio has played out: then the agent
	// listens.
	select {
	case <-transcribed:
	case <-ctx.Done():
		return
	}
	if ctx.Err() != nil {
		return
	}
	s.post(func(l *loop) {
		if l.play == p {
			l.play = nil
			l.setState(StateListening)
		}
	})
}

// dropOnRetraction drops the audio queued of a sentence as soon as the
// answer takes it back (retracted is closed), until done ends. A
// retraction comes with no sentence: while play waits for the next one,
// the audio queued of this one must go at once.
func (p *playback) dropOnRetraction(ctx, done context.Context, s *Stage, retracted <-chan struct{}) {
	select {
	case <-retracted:
		p.mu.Lock()
		p.dropRetracted(ctx, s)
		p.mu.Unlock()
	case <-done.Done():
	}
}

// add makes sent the answer's next sentence to speak; false if it was
// retracted since it was handed out. The audio of those before it that
// were retracted goes before this one's is written.
func (p *playback) add(ctx context.Context, s *Stage, sent pipeline.Sentence, text string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropRetracted(ctx, s)
	if closed(sent.Retracted()) {
		return false
	}
	p.spoken = append(p.spoken, newSpokenSentence(text, p.written, sent.Retracted()))
	p.grewLocked()
	return true
}

// say synthesises the sentence into the track; false when the answer
// stops here.
func (s *Stage) say(ctx context.Context, p *playback, sent pipeline.Sentence, text string) bool {
	sentAt := time.Now()
synthesis:
	for ev := range s.cfg.Synthesizer.Stream(ctx, &speech.SynthesizeRequest{Text: text, Voice: s.cfg.Voice}) {
		switch ev.Kind {
		case speech.SynthesizeAudio:
			s.firstSound(p, sentAt)
			more, ok := s.sound(ctx, p, sent, ev.Samples, ev.SampleRate)
			if !ok {
				return false
			}
			if !more {
				break synthesis
			}
		case speech.SynthesizeError:
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("voice: synthesis failed; the sentence is not spoken", "err", ev.Err, "sentence", sent.Sequence)
				s.speechFailed(ctx, "tts", ev.Err)
			}
		}
	}
	return p.said(ctx, s, sent)
}

// firstSound: the answer's first audio came from the synthesiser, for
// the sentence sent to it at sentAt; the agent is speaking.
func (s *Stage) firstSound(p *playback, sentAt time.Time) {
	p.mu.Lock()
	first := p.times.firstByte.IsZero()
	if first {
		p.times.toSynth, p.times.firstByte = sentAt, time.Now()
	}
	p.mu.Unlock()
	if !first {
		return
	}
	s.post(func(l *loop) {
		if l.play == p {
			l.voiced = p.turn
			l.setState(StateSpeaking)
			if l.spoke.IsZero() {
				l.spoke = time.Now()
			}
		}
	})
}

// sound queues samples of the sentence once there is room for them;
// more: the sentence goes on (not retracted meanwhile); ok false: the
// answer stops here.
func (s *Stage) sound(ctx context.Context, p *playback, sent pipeline.Sentence, samples []int16, rate int) (more, ok bool) {
	if !s.roomToPlay(ctx) {
		return false, false
	}
	// Checked under the lock interrupt takes before clearing, so that no
	// audio is queued after a barge-in cleared the queue.
	p.mu.Lock()
	if ctx.Err() != nil {
		p.mu.Unlock()
		return false, false
	}
	if closed(sent.Retracted()) {
		// Taken back while synthesised: no more of it.
		p.dropRetracted(ctx, s)
		p.mu.Unlock()
		return false, true
	}
	if !p.answered {
		p.answered = true
		p.endCue(s.out)
	}
	err := s.out.Write(samples, rate)
	p.written += time.Duration(len(samples)) * time.Second / time.Duration(rate)
	if p.times.firstAnswer.IsZero() {
		p.times.firstAnswer = time.Now()
		if p.times.firstAudio.IsZero() {
			p.times.firstAudio = p.times.firstAnswer
		}
	}
	p.spoken[len(p.spoken)-1].end = p.written
	p.mu.Unlock()
	if err != nil {
		s.cfg.Logger.Warn("voice: writing audio failed", "err", err)
		return false, false
	}
	return true, true
}

// said: the sentence's synthesis ended; false when the answer stops
// here.
func (p *playback) said(ctx context.Context, s *Stage, sent pipeline.Sentence) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.grewLocked()
	if closed(sent.Retracted()) {
		// Its audio is dropped, and its entry with it (dropRetracted).
		p.dropRetracted(ctx, s)
		return ctx.Err() == nil
	}
	last := &p.spoken[len(p.spoken)-1]
	last.done = ctx.Err() == nil
	if last.end == last.start {
		// Nothing was synthesised: nothing of it will be heard.
		p.spoken = p.spoken[:len(p.spoken)-1]
	}
	return ctx.Err() == nil
}

// playAhead is how far synthesis may run ahead of what the listener
// hears: the rest of the answer waits in the synthesiser's stream (its
// server is held back by the connection), as LiveKit's audio sources
// hold back the agents that feed them. Queued whole, answers held 380 kB
// per voice conversation at 50, a quarter of the bot's heap; two seconds
// is longer than a synthesiser takes to a sentence's first audio, so the
// next sentence is ready before this one has played.
const playAhead = 2 * time.Second

// roomToPlay waits until at most playAhead is queued (or held by a
// pause), and says false if ctx ended first.
func (s *Stage) roomToPlay(ctx context.Context) bool {
	return s.out.waitQueued(ctx, playAhead)
}
