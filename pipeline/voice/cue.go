package voice

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/speech"
)

// CueMode is what the agent plays while the model thinks and no answer
// is audible yet, so that a user can tell a thinking assistant from a
// broken one: a soft sound made here, a short spoken acknowledgement, or
// nothing.
type CueMode string

const (
	CueSound  CueMode = "sound"
	CuePhrase CueMode = "phrase"
	CueOff    CueMode = "off"
)

// Valid reports a known mode.
func (m CueMode) Valid() bool { return m == CueSound || m == CuePhrase || m == CueOff }

// cueRate is the rate the sound cue is made at: speech's, so that the
// voice track's resampler treats it like an answer.
const cueRate = 24000

// cueSource is a cue being played: the next samples, and a short fade to
// silence from where it is, so that the answer can take over without a
// click.
type cueSource interface {
	// next returns up to n samples; none when the cue is over.
	next(n int) []int16
	// fade returns the samples that bring it to silence from where it is.
	fade() []int16
	// rate is the samples' rate.
	rate() int
}

// pulse is the sound cue: a soft two-partial tone of 300 ms every
// 1.2 s, shaped by a raised cosine, about -20 dBFS at its peak: heard,
// not startling, and recognisably not speech.
type pulse struct{ i int }

const (
	pulsePeriod = cueRate * 12 / 10
	pulseLength = cueRate * 3 / 10
	fadeSamples = cueRate / 50 // 20 ms
)

func (p *pulse) sample(i int) float64 {
	k := i % pulsePeriod
	if k >= pulseLength {
		return 0
	}
	t := float64(i) / cueRate
	env := 0.5 - 0.5*math.Cos(2*math.Pi*float64(k)/pulseLength)
	return 3300 * env * (math.Sin(2*math.Pi*392*t) + 0.35*math.Sin(2*math.Pi*588*t))
}

func (p *pulse) next(n int) []int16 {
	out := make([]int16, n)
	for j := range out {
		out[j] = int16(p.sample(p.i + j))
	}
	p.i += n
	return out
}

func (p *pulse) rate() int { return cueRate }

func (p *pulse) fade() []int16 {
	if p.i%pulsePeriod >= pulseLength {
		return nil // between pulses: silent already
	}
	out := p.next(fadeSamples)
	fadeOut(out)
	return out
}

// spoken is the phrase cue: one short acknowledgement, played once.
type spoken struct {
	pcm []int16
	sr  int
	i   int
}

func (s *spoken) rate() int { return s.sr }

func (s *spoken) next(n int) []int16 {
	n = min(n, len(s.pcm)-s.i)
	out := s.pcm[s.i : s.i+n]
	s.i += n
	return out
}

func (s *spoken) fade() []int16 {
	out := append([]int16(nil), s.next(s.sr/50)...)
	fadeOut(out)
	return out
}

func fadeOut(s []int16) {
	for j := range s {
		s[j] = int16(float64(s[j]) * float64(len(s)-j) / float64(len(s)))
	}
}

// cuePhrases are said while the model thinks, never the same twice in a
// row; none says anything of the reasoning.
var cuePhrases = []string{"Let me think.", "One moment.", "Let me see.", "Just a second."}

// phraseCache keeps each phrase synthesised once per voice, for the
// process: a cue must not wait for a synthesiser.
type phraseCache struct {
	mu sync.Mutex
	m  map[string][]*spoken // voice → each of cuePhrases
}

var phrases = &phraseCache{m: map[string][]*spoken{}}

// get returns phrase i in voice, ready to play, synthesising the set on
// first use.
func (c *phraseCache) get(ctx context.Context, syn Synthesizer, voice string, i int) *spoken {
	c.mu.Lock()
	set := c.m[voice]
	c.mu.Unlock()
	if set == nil {
		set = make([]*spoken, len(cuePhrases))
		for k, text := range cuePhrases {
			set[k] = synthesise(ctx, syn, voice, text)
			if set[k] == nil {
				return nil // try again next time rather than cache a failure
			}
		}
		c.mu.Lock()
		c.m[voice] = set
		c.mu.Unlock()
	}
	return &spoken{pcm: set[i].pcm, sr: set[i].sr}
}

// synthesise renders text whole, or nil.
func synthesise(ctx context.Context, syn Synthesizer, voice, text string) *spoken {
	out := &spoken{}
	for ev := range syn.Stream(ctx, &speech.SynthesizeRequest{Text: text, Voice: voice}) {
		switch ev.Kind {
		case speech.SynthesizeAudio:
			out.pcm = append(out.pcm, ev.Samples...)
			out.sr = ev.SampleRate
		case speech.SynthesizeError:
			return nil
		}
	}
	if len(out.pcm) == 0 {
		return nil
	}
	return out
}

// outputLatency is how long queued audio takes to reach the listener
// (20 ms Opus frames, the SFU, the client's jitter buffer): the cue is
// queued that much before the user should hear it.
const outputLatency = 150 * time.Millisecond

// cueAhead is how much cue audio is queued ahead of the listener: little,
// so that the answer never waits behind it for long.
const cueAhead = 60 * time.Millisecond

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
	for {
		p.mu.Lock()
		more := p.cue != nil && ctx.Err() == nil && p.topUpCue(s.out)
		p.mu.Unlock()
		// Woken as the cue queued plays below cueAhead, or when the answer
		// takes over.
		if !more || !s.out.waitQueued(ctx, cueAhead-time.Nanosecond) {
			return
		}
	}
}

// topUpCue queues the cue until cueAhead of it is ahead of the listener;
// false once a phrase has been said. Called with mu held.
func (p *playback) topUpCue(out AudioOut) bool {
	for out.Queued() < cueAhead {
		chunk := p.cue.next(p.cue.rate() / 50)
		if len(chunk) == 0 {
			p.cue = nil // a phrase is said once
			return false
		}
		_ = out.Write(chunk, p.cue.rate())
		if p.times.firstAudio.IsZero() {
			p.times.firstAudio, p.times.cue = time.Now(), true
		}
	}
	return true
}

// cue is the thinking cue for the next turn: the client's choice, or
// the deployment's; nil for none.
func (l *loop) cue() func(context.Context) cueSource {
	mode := askedCue(l.s.room.Members())
	if !mode.Valid() {
		mode = l.s.cfg.Cue
	}
	switch mode {
	case CueSound:
		return func(context.Context) cueSource { return &pulse{} }
	case CuePhrase:
		l.phrase = (l.phrase + 1 + int(time.Now().UnixNano()%int64(len(cuePhrases)-1))) % len(cuePhrases)
		i, syn, voice := l.phrase, l.s.cfg.Synthesizer, l.s.cfg.Voice
		return func(ctx context.Context) cueSource {
			if sp := phrases.get(ctx, syn, voice, i); sp != nil {
				return sp
			}
			return nil
		}
	}
	return nil
}

// MarshalText and UnmarshalText make a mode a setting, refused at start
// when unknown.
func (m CueMode) MarshalText() ([]byte, error) { return []byte(m), nil }

func (m *CueMode) UnmarshalText(b []byte) error {
	if v := CueMode(b); v.Valid() {
		*m = v
		return nil
	}
	return fmt.Errorf("thinking cue %q: sound, phrase or off", b)
}

// askedCue is the cue the clients asked for with wire.FeatureThinkingCue
// ("" for none); with several, the quietest wins (off, then phrase), so
// that nobody hears what they turned off.
func askedCue(members []pipeline.Member) CueMode {
	rank := func(m CueMode) int { return slices.Index([]CueMode{"", CueSound, CuePhrase, CueOff}, m) }
	var best CueMode
	for _, m := range members {
		if mode := CueMode(m.Features.ThinkingCue); rank(mode) > rank(best) {
			best = mode
		}
	}
	return best
}

// wantsAudio: a client announced audio_output; without one nothing is
// synthesised.
func wantsAudio(members []pipeline.Member) bool {
	return slices.ContainsFunc(members, func(m pipeline.Member) bool { return m.Features.AudioOutput })
}
