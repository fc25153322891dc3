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
}

// spokenSentence is one sentence's audio in the answer, and its words
// placed in it.
type spokenSentence struct {
	words []string
	// at is where each word starts, as a share of the sentence's audio,
	// by syllables: speech spends its time on syllables, not letters.
	at []float64
	// start and end place its audio from the answer's start; done says
	// its synthesis is complete.
	start, end time.Duration
	done       bool
	released   int // words gone out as transcript
	// retracted is closed when the answer takes the sentence back
	// (pipeline.Sentence.Retracted); cut says its audio not played was
	// dropped for it.
	retracted <-chan struct{}
	cut       bool
}

func newSpokenSentence(text string, start time.Duration, retracted <-chan struct{}) spokenSentence {
	s := spokenSentence{words: strings.Fields(text), start: start, end: start, retracted: retracted}
	total := 0
	for _, w := range s.words {
		total += syllables(w)
	}
	n := 0
	for _, w := range s.words {
		s.at = append(s.at, float64(n)/float64(max(1, total)))
		n += syllables(w)
	}
	return s
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

// syllableRate is how fast synthesised speech says syllables, for a
// sentence whose audio is still coming: about LiveKit Agents' 3.83/s.
const syllableRate = 3.8

// wordAt is where word i starts in the answer's audio, and where it
// ends (the next word's start, or the sentence's end).
func (s *spokenSentence) wordAt(i int) (start, end time.Duration) {
	length := s.end - s.start
	if !s.done {
		// Still being synthesised: no word is placed before what its
		// syllables need.
		n := 0
		for _, w := range s.words {
			n += syllables(w)
		}
		length = max(length, time.Duration(float64(n)/syllableRate*float64(time.Second)))
	}
	pos := func(f float64) time.Duration { return s.start + time.Duration(f*float64(length)) }
	start = pos(s.at[i])
	end = s.start + length
	if i+1 < len(s.words) {
		end = pos(s.at[i+1])
	}
	return start, end
}

// syllables counts a word's vowel groups, at least one: close enough to
// place words in a sentence's audio.
func syllables(w string) int {
	n, vowel := 0, false
	for _, r := range strings.ToLower(w) {
		v := strings.ContainsRune("aeiouy", r)
		if v && !vowel {
			n++
		}
		vowel = v
	}
	return max(1, n)
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

// release sends the words the user has heard begin since the last
// release as the agent's transcript: text in step with the audio, paused
// with it, and cut where it is cut. Called with mu held, so that no word
// goes out after a barge-in.
func (p *playback) release(ctx context.Context, s *Stage, segmentID string) (all bool) {
	if ctx.Err() != nil {
		return false
	}
	played := p.playedLocked(s.out)
	var b strings.Builder
	for p.released < len(p.spoken) {
		sent := &p.spoken[p.released]
		for sent.released < len(sent.words) {
			if start, _ := sent.wordAt(sent.released); start > played || sent.end == sent.start {
				break
			}
			if p.released > 0 || sent.released > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(sent.words[sent.released])
			sent.released++
		}
		if sent.released < len(sent.words) || !sent.done {
			break
		}
		p.released++
	}
	all = p.synthesised && p.released == len(p.spoken) && s.out.Queued() <= 0
	p.whole = all
	if b.Len() > 0 || all {
		s.room.AgentSpeech(ctx, AgentSpeech{SegmentID: segmentID, AnswerID: answerID(p.turn), TrackID: s.out.TrackID(), Text: b.String(), Final: all})
	}
	return all
}

// transcribe releases the answer's words as they are played, until all
// are out or the answer is stopped.
func (s *Stage) transcribe(ctx context.Context, p *playback, segmentID string) {
	tick := time.NewTicker(transcriptTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.mu.Lock()
		all := p.release(ctx, s, segmentID)
		p.mu.Unlock()
		if all {
			return
		}
	}
}

// transcriptTick is how often the agent's transcript catches up with its
// audio: a word is shown at most this late.
const transcriptTick = 50 * time.Millisecond

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
	started := false
	for sent := range p.turn.Sentences(ctx) {
		text := Speakable(sent)
		if text == "" {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		// A sentence retracted since it was handed out is not spoken, and
		// audio of those before it goes before this one's is written.
		p.dropRetracted(ctx, s)
		if closed(sent.Retracted()) {
			p.mu.Unlock()
			continue
		}
		p.spoken = append(p.spoken, newSpokenSentence(text, p.written, sent.Retracted()))
		p.mu.Unlock()
		if ch := sent.Retracted(); ch != nil {
			// A retraction comes with no sentence: while play waits for the
			// next one, the audio queued of this one must go at once.
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-ch:
					p.mu.Lock()
					p.dropRetracted(ctx, s)
					p.mu.Unlock()
				case <-tctx.Done():
				}
			}()
		}
		sentAt := time.Now()
	synthesis:
		for ev := range s.cfg.Synthesizer.Stream(ctx, &speech.SynthesizeRequest{Text: text, Voice: s.cfg.Voice}) {
			switch ev.Kind {
			case speech.SynthesizeAudio:
				if !started {
					p.mu.Lock()
					p.times.toSynth, p.times.firstByte = sentAt, time.Now()
					p.mu.Unlock()
					started = true
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
				if !s.roomToPlay(ctx) {
					return
				}
				// Checked under the lock interrupt takes before clearing, so
				// that no audio is queued after a barge-in cleared the queue.
				p.mu.Lock()
				if ctx.Err() != nil {
					p.mu.Unlock()
					return
				}
				if closed(sent.Retracted()) {
					// Taken back while synthesised: no more of it.
					p.dropRetracted(ctx, s)
					p.mu.Unlock()
					break synthesis
				}
				if !p.answered {
					p.answered = true
					p.endCue(s.out)
				}
				err := s.out.Write(ev.Samples, ev.SampleRate)
				p.written += time.Duration(len(ev.Samples)) * time.Second / time.Duration(ev.SampleRate)
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
					return
				}
			case speech.SynthesizeError:
				if ctx.Err() == nil {
					s.cfg.Logger.Warn("voice: synthesis failed; the sentence is not spoken", "err", ev.Err, "sentence", sent.Sequence)
					s.speechFailed(ctx, "tts", ev.Err)
				}
			}
		}
		p.mu.Lock()
		if closed(sent.Retracted()) {
			// Its audio is dropped, and its entry with it (dropRetracted).
			p.dropRetracted(ctx, s)
			p.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			continue
		}
		last := &p.spoken[len(p.spoken)-1]
		last.done = ctx.Err() == nil
		if last.end == last.start {
			// Nothing was synthesised: nothing of it will be heard.
			p.spoken = p.spoken[:len(p.spoken)-1]
		}
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	p.synthesised = true
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

// playAhead is how far synthesis may run ahead of what the listener
// hears: the rest of the answer waits in the synthesiser's stream (its
// server is held back by the connection), as LiveKit's audio sources
// hold back the agents that feed them. Queued whole, answers held 380 kB
// per voice conversation at 50, a quarter of the bot's heap; two seconds
// is longer than a synthesiser takes to a sentence's first audio, so the
// next sentence is ready before this one has played.
const playAhead = 2 * time.Second

// roomToPlay waits until less than playAhead is queued (or held by a
// pause), and says false if ctx ended first.
func (s *Stage) roomToPlay(ctx context.Context) bool {
	if s.out.Queued() <= playAhead {
		return true
	}
	tick := time.NewTicker(5 * FrameDuration)
	defer tick.Stop()
	for s.out.Queued() > playAhead {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// endCue stops the cue for the answer: a short fade from where it is,
// queued before the answer's first audio, so that the two never overlap
// and nothing clicks. Called with mu held.
func (p *playback) endCue(out AudioOut) {
	if p.cue == nil {
		return
	}
	if tail := p.cue.fade(); len(tail) > 0 {
		_ = out.Write(tail, p.cue.rate())
	}
	p.cue = nil
}

// playCue plays the thinking cue from at until the answer's first audio,
// a little ahead of the listener at a time, so that the answer never
// waits behind more than cueAhead of it.
func (s *Stage) playCue(ctx context.Context, p *playback, at time.Time, src func(context.Context) cueSource) {
	// Made while the cue's time comes: a phrase may need synthesising.
	cue := src(ctx)
	if cue == nil {
		return
	}
	select {
	case <-time.After(time.Until(at)):
	case <-ctx.Done():
		return
	}
	p.mu.Lock()
	if p.answered || ctx.Err() != nil {
		p.mu.Unlock()
		s.cfg.Logger.Debug("voice: no thinking cue: the answer came first, or the turn ended", "message", p.turn.UserMessageID())
		return
	}
	p.cue = cue
	p.mu.Unlock()
	s.cfg.Logger.Debug("voice: the thinking cue starts", "message", p.turn.UserMessageID())
	tick := time.NewTicker(FrameDuration)
	defer tick.Stop()
	for {
		p.mu.Lock()
		if p.cue == nil || ctx.Err() != nil {
			p.mu.Unlock()
			return
		}
		for s.out.Queued() < cueAhead {
			chunk := p.cue.next(p.cue.rate() / 50)
			if len(chunk) == 0 {
				p.cue = nil // a phrase is said once
				break
			}
			_ = s.out.Write(chunk, p.cue.rate())
			if p.times.firstAudio.IsZero() {
				p.times.firstAudio, p.times.cue = time.Now(), true
			}
		}
		p.mu.Unlock()
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
