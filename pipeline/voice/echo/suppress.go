package echo

import (
	"math"
	"time"
)

// suppress decides what to do with the frame that ends with hop b, at t,
// quiet (no louder than the room's noise) or silent (under minLevel), and
// does it: processed, the analyser's buffer holds the frame to overlap;
// removed, the frame's sound was taken out as echo.
func (s *Suppressor) suppress(b []int16, t time.Time, quiet, silent bool) (processed, removed bool) {
	st := s.ref.state()
	s.active = st.rate != 0 && !st.sound.Before(t.Add(-window))
	if !s.active {
		// The agent has not talked lately: no echo. A microphone known to
		// carry none lets go of its analysis, and of the agent's audio,
		// until someone talks over the agent again (100 KB a speaker, 48
		// KB a conversation).
		if s.mode == none {
			s.w = nil
			s.keep(false)
		}
		return false, false
	}
	if s.mode == none && quiet {
		return false, false
	}
	w := s.work()
	s.keep(true)
	if !w.refs.sync() {
		return false, false
	}
	k := w.refs.hopOf(t)
	w.refs.ensure(k, t)
	var h heardHop
	s.hear(w, b, k, quiet, silent, &h)
	if w.est.update(&h.levels, w.refs, k, s.mode == none) {
		s.lock(w, k)
	}
	if !s.predict(w, k, quiet, &h) {
		return false, false
	}
	over := echoOnlyOver
	if s.taken-s.talked <= talkHold*hop {
		over = echoOnlyTalking
	}
	share := unexplainedShare(&h.power, &h.judged, &w.noise.power, over)
	switch {
	case s.mode != locked:
		w.drift = drift{}
	case s.realign(w, k, over, &h, share >= unexplained):
		// The hops that looked like the user over the echo were the
		// echo, come at another delay: the new one explains them all.
		s.talked, over = math.MinInt64/2, echoOnlyOver
		share = unexplainedShare(&h.power, &h.judged, &w.noise.power, over)
	}
	g, echoOnly, removed := gains(&h.power, &h.bins, &h.echoBins, s.noise(), share)
	if s.doubleTalkAt(share) {
		s.talked = s.taken
	}
	if s.mode == locked && echoOnly {
		w.path.adapt(&h.power, &h.bound)
	}
	w.mic.synthesise(&g)
	return true, removed
}

// doubleTalkAt says whether this hop, whose sound the echo leaves
// unexplained for share, proves that the user talks over the agent: a
// share of doubleTalk, or of doubleTalkRun for doubleTalkHops hops in a
// row.
func (s *Suppressor) doubleTalkAt(share float64) bool {
	if share < doubleTalkRun {
		s.unsureRun = 0
		return false
	}
	if s.unsure != s.taken-hop {
		s.unsureRun = 0
	}
	s.unsure, s.unsureRun = s.taken, s.unsureRun+1
	return share >= doubleTalk || s.unsureRun >= doubleTalkHops
}

// heardHop is a hop of the microphone as analysed, and the echo in it as
// predicted.
type heardHop struct {
	power       powers
	bins        spectrum
	levels      levels
	echo, bound powers
	// judged is the echo the hop is judged against (path.predict).
	judged   powers
	echoBins spectrum
}

// hear analyses the frame that ends with hop b into h. A quiet frame is
// the room's noise, learnt by band (bandNoise); a silent one is not
// analysed, and its levels are the lowest.
func (s *Suppressor) hear(w *work, b []int16, k int64, quiet, silent bool, h *heardHop) {
	if silent {
		for i := range h.levels {
			h.levels[i] = floorDB
		}
		return
	}
	for i, v := range s.prev {
		w.mic.buf[i] = float32(v)
	}
	for i, v := range b {
		w.mic.buf[hop+i] = float32(v)
	}
	w.mic.analyse(&h.bins, &h.power)
	if quiet {
		w.noise.add(&h.power)
	} else {
		w.mics.add(k, &h.power)
	}
	h.levels = w.noise.floored(&h.power)
}

// predict puts the echo in h as the mode knows it, and moves the mode
// on; false when the hop goes through as it came.
func (s *Suppressor) predict(w *work, k int64, quiet bool, h *heardHop) bool {
	switch s.mode {
	case unknown:
		s.unknownHop(w.refs, k, quiet)
		if quiet || s.mode != unknown {
			return false
		}
		h.echo = upperBound(w.refs, k)
		h.judged = h.echo
		for i, v := range h.bins {
			// The bound is a band's: each bin gets its share.
			if b := bandOf[i]; h.power[b] > 0 {
				h.echoBins[i] = h.echo[b] * v / h.power[b]
			}
		}
		return true
	case locked:
		h.echo, h.bound, h.judged = w.path.predict(w.refs, k, w.est.delay, &h.echoBins)
		s.lockedHop(&h.echo, &h.power, quiet)
		return !quiet && s.mode == locked
	}
	return false
}

// noise is the microphone's noise level as a mean square, as band powers
// add up to, and never under comfortLevel's.
func (s *Suppressor) noise() float64 {
	return max(s.floor.level(), comfortLevel*comfortLevel)
}

// comfortLevel (RMS, about -78 dBFS) is what echo taken out leaves at
// least, on a microphone that is digitally silent but for the echo (a
// client's noise suppression, a test's): far under what the endpointer
// hears as sound, but not digital silence, which a recogniser may take
// for a break in the utterance (pocketsphinx did, mid-sentence, when the
// echo between "Stop," and "tell me" became zeros).
const comfortLevel = 4

// work is the analysis, made when first needed: a microphone that never
// hears the agent's voice come back costs none of it.
func (s *Suppressor) work() *work {
	if s.w == nil {
		s.w = &work{mic: newAnalyser(Rate), refs: newRefCache(s.ref), est: newEstimator()}
	}
	return s.w
}

// unknownHop moves an unknown path to none when the microphone stayed
// quiet while an echo was due, when what it heard does not follow the
// agent, or when no path was found for too long. Only the hops when the
// agent's voice was due count: a tone's echo, the thinking cue's, follows
// the agent's band levels poorly (its rises are in the few bands its two
// partials fill, the room's noise in the rest), and a cue of two pulses
// or more played before the first answer took the microphone for one
// without echo, which let that answer's echo through whole. What does
// not follow the agent closely enough may still have held a clear peak
// at the echo's delay (a noisy room's): the path is locked there then
// (estimator.settle).
func (s *Suppressor) unknownHop(refs *refCache, k int64, quiet bool) {
	due := false
	for l := int64(noEchoFrom); l <= noEchoTo && !due; l++ {
		due = refs.at(k - l).voice
	}
	if !quiet {
		s.quietRun = 0
	}
	if !due {
		return
	}
	s.unknownHops++
	if quiet {
		s.quietRun++
	} else {
		s.soundHops++
	}
	notFollowing := s.soundHops >= notEchoHops && s.w.est.best < notEcho
	if s.quietRun >= noEchoHops || notFollowing || s.unknownHops >= unknownMax {
		if notFollowing && s.w.est.settle() && s.lock(s.w, k) {
			return
		}
		s.mode = none
	}
}

// lock learns the path at the delay the estimator locked as of hop k,
// and takes it; a delay whose path could not be an echo's is taken back.
func (s *Suppressor) lock(w *work, k int64) bool {
	if !w.path.learn(&w.mics, w.refs, &w.noise.power, w.est.delay, k) {
		w.est.unlock()
		return false
	}
	s.mode, s.missing = locked, 0
	return true
}

// lockedHop drops a known path whose echo stopped coming: its predicted
// echo is well above the microphone's noise and the microphone is quiet.
// It also notes the hop (gone) when the echo due was not there, quiet or
// far under its prediction: where an echo that moved left its old delay.
func (s *Suppressor) lockedHop(echo, heard *powers, quiet bool) {
	due := echo.total() > 100*max(s.floor.level(), minLevel*minLevel)
	if due && (quiet || heard.total()*echoOnlyOver < echo.total()) {
		s.gone = s.taken
	}
	switch {
	case !quiet:
		s.missing = 0
	case due:
		s.missing++
	}
	if s.missing >= missingMax {
		s.mode, s.missing = none, 0
		s.w.est = newEstimator()
	}
}

// stretch follows a stretch of the microphone's sound removed as echo:
// it ends after stretchGap hops without any.
type stretch struct {
	removed, gap int
	counted      bool
}

const stretchGap = 30

// hop takes a hop with sound or not, removed or not, and says whether the
// stretch just became long enough to count.
func (s *stretch) hop(sound, removed bool, minHops int) bool {
	if sound && removed {
		s.removed++
		s.gap = 0
		if !s.counted && s.removed >= minHops {
			s.counted = true
			return true
		}
		return false
	}
	s.gap++
	if s.gap >= stretchGap {
		*s = stretch{}
	}
	return false
}

// clock maps the microphone's samples to when they came. A chunk comes
// late by the network's jitter, never early, so the earliest arrival is
// the truest: the clock follows earlier arrivals at once and later ones
// slowly (a sender's clock drifts). Arrivals more than lateGap later than
// it expects are believed only once they have stayed that late for
// lateHold: a stall in delivery (a congested network's, or this
// process's when the machine is busy) hands over the audio it held all
// at once, each chunk a frame less late than the one before, and the
// clock is right again at the end of the burst; audio lost, not filled,
// leaves every later chunk as late. Started over at the first late
// chunk, as it was, the clock dated the burst's first 100 to 300 ms up to
// a stall late, the echo in it was judged against the agent's audio of
// that much later, and went through: stalls of 200 ms every 1.5 s
// started speech in one answer of four, 300 ms in every one
// (TestEchoOverStalledDelivery).
type clock struct {
	base time.Time
	set  bool
	// lateAt is when the arrivals began to come late, zero while they
	// do not.
	lateAt time.Time
}

const (
	lateGap  = 100 * time.Millisecond
	lateHold = 200 * time.Millisecond
)

func samples(n int64) time.Duration { return time.Duration(n) * time.Second / Rate }

// stamp: the sample at position end came at at.
func (c *clock) stamp(end int64, at time.Time) {
	est := at.Add(-samples(end))
	switch d := est.Sub(c.base); {
	case !c.set || d < 0:
		c.base, c.set, c.lateAt = est, true, time.Time{}
	case d <= lateGap:
		c.base, c.lateAt = c.base.Add(d/100), time.Time{}
	case c.lateAt.IsZero():
		c.lateAt = at
	case at.Sub(c.lateAt) >= lateHold:
		c.base, c.lateAt = est, time.Time{}
	}
}

// at is when the sample at position p came.
func (c *clock) at(p int64) time.Time { return c.base.Add(samples(p)) }
