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
