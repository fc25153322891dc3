package voice

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
)

// playback is one answer being spoken.
type playback struct {
	cancel context.CancelFunc
	turn   Turn

	mu      sync.Mutex
	written time.Duration
	spoken  []spokenSentence
	// cue plays until the answer's first audio (nil when none plays);
	// cued is how much of it was queued, ahead of the answer.
	cue      cueSource
	cued     time.Duration
	answered bool
}

type spokenSentence struct {
	text string
	// start and end place its audio from the answer's start; done says
	// its synthesis is complete.
	start, end time.Duration
	done       bool
}

// interrupt clears the queued audio and says how much was heard.
func (p *playback) interrupt(out AudioOut) pipeline.Heard {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	queued := out.Queued()
	out.Clear()
	// The cue, if any, was queued ahead of the answer: what is left is
	// the answer's end.
	played := max(0, p.written-queued)
	h := pipeline.Heard{Played: played, Total: p.written}
	var full []string
	for _, s := range p.spoken {
		if s.done && s.end <= played {
			full = append(full, s.text)
			continue
		}
		if s.start < played {
			h.Partial = s.text
		}
		break
	}
	h.Text = strings.Join(full, " ")
	return h
}

// play synthesises the turn's sentences one after another while the
// audio of the earlier ones plays: AudioOut queues and paces, so the
// next sentence is ready before the previous one has played out.
func (s *Stage) play(ctx context.Context, p *playback, segmentID string) {
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
		p.spoken = append(p.spoken, spokenSentence{text: text, start: p.written, end: p.written})
		p.mu.Unlock()
		for ev := range s.cfg.Synthesizer.Stream(ctx, &SynthesizeRequest{Text: text, Voice: s.cfg.Voice}) {
			switch ev.Kind {
			case SynthesizeAudio:
				if !started {
					started = true
					s.post(func(l *loop) {
						if l.play == p {
							l.setState(StateSpeaking)
							if l.spoke.IsZero() {
								l.spoke = time.Now()
							}
						}
					})
				}
				// Checked under the lock interrupt takes before clearing, so
				// that no audio is queued after a barge-in cleared the queue.
				p.mu.Lock()
				if ctx.Err() != nil {
					p.mu.Unlock()
					return
				}
				if !p.answered {
					p.answered = true
					p.endCue(s.out)
				}
				err := s.out.Write(ev.Samples, ev.SampleRate)
				p.written += time.Duration(len(ev.Samples)) * time.Second / time.Duration(ev.SampleRate)
				p.spoken[len(p.spoken)-1].end = p.written
				p.mu.Unlock()
				if err != nil {
					s.cfg.Logger.Warn("voice: writing audio failed", "err", err)
					return
				}
			case SynthesizeError:
				if ctx.Err() == nil {
					s.cfg.Logger.Warn("voice: synthesis failed; the sentence is not spoken", "err", ev.Err, "sentence", sent.Sequence)
				}
			}
		}
		p.mu.Lock()
		p.spoken[len(p.spoken)-1].done = ctx.Err() == nil
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		s.room.AgentSpeech(ctx, AgentSpeech{SegmentID: segmentID, TrackID: s.out.TrackID(), Text: text})
	}
	if ctx.Err() != nil {
		return
	}
	s.room.AgentSpeech(ctx, AgentSpeech{SegmentID: segmentID, TrackID: s.out.TrackID(), Final: true})
	// Wait for the queue to play out before saying the agent listens.
	for ctx.Err() == nil {
		q := s.out.Queued()
		if q <= 0 {
			break
		}
		select {
		case <-time.After(q):
		case <-ctx.Done():
		}
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

// endCue stops the cue for the answer: a short fade from where it is,
// queued before the answer's first audio, so that the two never overlap
// and nothing clicks. Called with mu held.
func (p *playback) endCue(out AudioOut) {
	if p.cue == nil {
		return
	}
	if tail := p.cue.fade(); len(tail) > 0 {
		_ = out.Write(tail, p.cue.rate())
		p.cued += time.Duration(len(tail)) * time.Second / time.Duration(p.cue.rate())
	}
	p.cue = nil
}

// playCue plays the thinking cue from at until the answer's first audio,
// a little ahead of the listener at a time, so that the answer never
// waits behind more than cueAhead of it.
func (s *Stage) playCue(ctx context.Context, p *playback, at time.Time, src func(context.Context) cueSource) {
	select {
	case <-time.After(time.Until(at)):
	case <-ctx.Done():
		return
	}
	p.mu.Lock()
	answered := p.answered
	p.mu.Unlock()
	if answered {
		return
	}
	cue := src(ctx)
	if cue == nil {
		return
	}
	p.mu.Lock()
	if p.answered || ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	p.cue = cue
	p.mu.Unlock()
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
			p.cued += time.Duration(len(chunk)) * time.Second / time.Duration(p.cue.rate())
		}
		p.mu.Unlock()
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
