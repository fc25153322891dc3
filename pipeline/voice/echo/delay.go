package echo

import "math"

// maxLag is the longest echo delay looked for, in hops (800 ms): the way
// back from the agent's track through LiveKit, the client's jitter
// buffer, its playout and capture, LiveKit again and the microphone's
// jitter buffer here.
const maxLag = 80

// estimator finds the echo's delay: the lag at which the microphone's
// band levels rise and fall with the reference's. It keeps, for every
// lag, the correlation of the two's rises (each band's level less the
// hop before's, summed over the bands), over an exponential window of
// about a second of the hops it was given, and locks on a clear peak
// that holds for a while; it keeps the last good delay until another one
// is as clear.
//
// Rises, not levels: a level's correlation with itself falls off over a
// syllable (200 ms), so an echo's lag stood out from its neighbours by a
// margin of 0.15 only after a second or two of it, and over LiveKit,
// where the first answer begins with short phrases, after 2.5 s; the
// agent's voice had paused the agent twice by then. A rise's falls off
// within a hop or two: an echo's lag stands out by 0.4 to 0.75 within
// 0.1 to 0.4 s of it, over LiveKit too, while speech not the agent's,
// a user's on a headset, gets 0.2 (TestEchoFoundAndRemoved).
type estimator struct {
	// c is the correlation at each lag, vy the reference's variance at
	// each lag, vx the microphone's.
	c, vy [maxLag + 1]float64
	vx    float64
	// last is the microphone's band levels at the hop before.
	last   levels
	lasted bool
	// updates is how many hops it was given since it started.
	updates int
	// cand is the peak of the last hops, held for stable of them;
	// candClear: it was a clear peak (minPeak) in some of them.
	cand, stable int
	candClear    bool
	// delay is the locked delay in hops, -1 while none is; best is the
	// highest correlation at the last hop, and margin how far it stood
	// above the highest of the lags away from it: a delay stands out.
	delay        int
	best, margin float64
	// was is the delay locked before the last one.
	was int
	// top is the lag of the highest correlation, which it has held, give
	// or take a lag, for topHeld hops, however high.
	top, topHeld int
}

const (
	// forget is the correlations' decay per hop: a window of a second.
	forget = 0.99
	// minUpdates are the hops the estimator needs before it may lock:
	// two syllables.
	minUpdates = 30
	// minPeak is the least correlation a delay locks at, and minMargin
	// how far above any lag further than peakWidth from it: an echo's
	// rises follow the agent's closely (0.65 to 0.9 alone, 0.44 with the
	// user talking over its first words), speech not its own gets about
	// 0.2.
	minPeak   = 0.4
	minMargin = 0.15
	peakWidth = 3
	// lockHops is how long a peak must hold to lock (100 ms), and
	// moveHops how long a new peak must to move a locked delay.
	lockHops = 10
	moveHops = 30
	// A microphone known to carry no echo is heard only while it has
	// sound, which leaves the estimator few hops, the user's own speech
	// among them: a delay is found there only on a peak of strictPeak
	// standing strictMargin clear, held moveHops. A headset user's
	// speech reached 0.64 and 0.34, over many seconds of talk over the
	// agent.
	strictPeak   = 0.7
	strictMargin = 0.4
	// In a noisy room the echo's rises are partly the noise's, and its
	// lag's correlation may stay under minPeak however long it lasts,
	// though it stands clear of every other lag. Over LiveKit, with the
	// client's Opus coding the echo (100 ms, -10 dB) and a room 9.5 dB
	// noisier than the tests' together, 3 of 22 first answers held 0.36
	// to 0.39 for their first 40 hops of sound (one of them at one lag
	// throughout, 0.2 to 0.27 clear of the rest): the microphone was
	// taken for one without echo, where strictPeak was never reached
	// again, and the answer's echo paused the agent 30 to 36 times. A
	// peak of weakPeak and up that stands minMargin clear therefore
	// locks too, held weakHops (500 ms). A headset user's speech over
	// the agent, the one sound that could mislead it, moved its peak
	// from lag to lag, and where it held one for 200 ms stood 0.02 to
	// 0.07 clear (TestBargeInEarlyInTheFirstAnswer).
	//
	// A peak that was clear and then weakened, at the same lag, locks
	// as a clear one does, in lockHops: the first hops of an answer in
	// that room correlated at 0.72 falling to 0.44 by the time the
	// estimator judged (minUpdates), then under minPeak 8 hops into its
	// lockHops, and 4 of 12 such answers, their microphone taken for one
	// without echo 40 hops of sound in, when the weak lock had held 23
	// of its 50, paused the agent 3 to 5 times each.
	weakPeak = 0.3
	weakHops = 50
	// The microphone is taken for one without echo when, after
	// notEchoHops of sound, the best correlation is under notEcho
	// (suppress.go). In a room 15.6 dB noisier than the tests' (-39.5
	// dBFS) an echo at -10 dB never reached that, nor weakPeak: its lag
	// held the highest correlation from the first hop judged, 32 to 40
	// hops, at 0.25 to 0.28 and 0.14 to 0.18 clear of the rest, and the
	// echo, let through, started speech 0.8 to 1.2 s into the first
	// answer (BenchmarkEchoInNoisyRoom). A peak held lockHops at
	// settlePeak and minMargin clear is therefore locked then, not ruled
	// out (settle). A headset user's speech over the agent moved its peak
	// from lag to lag, and stood 0.02 to 0.07 clear where it held one.
	settlePeak = 0.25
)

func newEstimator() *estimator { return &estimator{delay: -1} }

// update takes the microphone's levels at the hop whose reference hop at
// lag 0 is k, and says whether the locked delay changed; strict: the
// microphone is known to carry no echo.
func (e *estimator) update(x *levels, refs *refCache, k int64, strict bool) bool {
	if !e.lasted {
		e.last, e.lasted = *x, true
	}
	var rise levels
	var xx float64
	for b, v := range x {
		rise[b] = v - e.last[b]
		xx += rise[b] * rise[b]
	}
	e.last = *x
	e.vx = forget*e.vx + xx
	for l := range e.c {
		h := refs.at(k - int64(l))
		var dot float64
		for b := range rise {
			dot += rise[b] * float64(h.rise[b])
		}
		e.c[l] = forget*e.c[l] + dot
		e.vy[l] = forget*e.vy[l] + float64(h.variance)
	}
	e.updates++
	return e.judge(strict)
}

// peak is the lag of the highest correlation, its value, and the highest
// one further than peakWidth from it.
func (e *estimator) peak() (lag int, best, second float64) {
	rho := func(l int) float64 { return e.c[l] / math.Sqrt(e.vx*e.vy[l]+1e-9) }
	best = math.Inf(-1)
	for l := range e.c {
		if r := rho(l); r > best {
			lag, best = l, r
		}
	}
	second = math.Inf(-1)
	for l := range e.c {
		if l < lag-peakWidth || l > lag+peakWidth {
			second = max(second, rho(l))
		}
	}
	return lag, best, second
}

// judge locks on a clear peak that held long enough.
func (e *estimator) judge(strict bool) bool {
	if e.updates < minUpdates {
		return false
	}
	lag, best, second := e.peak()
	e.margin, e.best = best-second, best
	if abs(lag-e.top) <= 1 {
		e.topHeld++
	} else {
		e.top, e.topHeld = lag, 1
	}
	peak, margin := minPeak, minMargin
	if strict {
		peak, margin = strictPeak, strictMargin
	}
	clearPeak := best >= peak && best-second >= margin
	weak := !clearPeak && e.delay < 0 && best >= weakPeak && best-second >= minMargin
	if !clearPeak && !weak {
		e.stable, e.candClear = 0, false
		return false
	}
	if abs(lag-e.cand) <= 1 {
		e.stable++
	} else {
		e.cand, e.stable, e.candClear = lag, 1, false
	}
	e.candClear = e.candClear || clearPeak
	need := lockHops
	switch {
	case weak && !e.candClear:
		need = weakHops
	case e.delay >= 0 || strict:
		need = moveHops
	}
	// A lag next to the locked one is the same path: the taps cover it.
	if e.stable < need || (e.delay >= 0 && abs(lag-e.delay) <= 1) {
		return false
	}
	e.was, e.delay = e.delay, lag
	return true
}

// settle locks the delay at a peak too weak for judge that has held
// its lag lockHops and stands clear (settlePeak), when the microphone
// would otherwise be taken for one without echo.
func (e *estimator) settle() bool {
	if e.delay >= 0 || e.topHeld < lockHops {
		return false
	}
	lag, best, second := e.peak()
	if best < settlePeak || best-second < minMargin {
		return false
	}
	e.was, e.delay = e.delay, lag
	return true
}

// shift moves the locked delay by off hops, as if the echo had come
// that much later (earlier) all along: the correlations move with it, so
// that the old lag's peak, a second's history, does not take the delay
// back before the new one has built its own.
func (e *estimator) shift(off int) {
	move := func(a *[maxLag + 1]float64) {
		old := *a
		for l := range a {
			if from := l - off; from >= 0 && from <= maxLag {
				a[l] = old[from]
			} else {
				a[l] = 0
			}
		}
	}
	move(&e.c)
	move(&e.vy)
	e.was, e.delay = e.delay, e.delay+off
	e.cand, e.stable = e.delay, 0
}

// unlock takes back the last delay locked: the path found there could
// not be an echo's.
func (e *estimator) unlock() { e.delay, e.stable = e.was, 0 }

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
