package voice

import (
	"slices"
	"time"
)

// Pauses too short to say anything of a speaker's rhythm: stops inside
// words and the VAD's flicker.
const minPause = 100 * time.Millisecond

// pauseWindow is how many recent pauses the endpointer learns from: a
// minute or so of speech, so that it follows a speaker who slows down.
const pauseWindow = 32

// pauseMargin is what the silence that ends an utterance adds to the
// speaker's usual long pause (pausePercentile of theirs).
const (
	pauseMargin     = 200 * time.Millisecond
	pausePercentile = 0.8
	minPauses       = 4
)

// pauses is a ring of one speaker's recent pauses inside utterances.
type pauses struct {
	seen [pauseWindow]time.Duration
	n    int // how many were ever added
}

func (p *pauses) add(d time.Duration) {
	p.seen[p.n%pauseWindow] = d
	p.n++
}

// silence is the silence that ends this speaker's utterance: def until
// minPauses are known, then a margin over their pausePercentile pause,
// within [lo, hi].
func (p *pauses) silence(def, lo, hi time.Duration) time.Duration {
	if p.n < minPauses {
		return def
	}
	s := slices.Clone(p.seen[:min(p.n, pauseWindow)])
	slices.Sort(s)
	d := s[int(pausePercentile*float64(len(s)-1)+0.5)] + pauseMargin
	return max(lo, min(hi, d))
}
