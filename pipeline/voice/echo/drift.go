package echo

// A client's jitter buffer grows when its network gets worse, and the
// echo then comes back later than the delay the estimator locked: over
// LiveKit, 40 to 60 ms later within the first seconds of a call. The
// estimator's correlations span a second, so it moved to the new delay a
// second or so later; until then the echo's syllables were predicted
// before they came, and what was left of them started speech that paused
// the agent (TestEchoLaterMidAnswer). A hop the locked delay does not
// explain is therefore tried at the delays around it: a delay that
// explains driftConfirm such hops (40 ms), and every hop with sound
// between them, is where the echo now comes, and the path moves there,
// gains and all. A user's voice may
// sit under the agent's at some lag for a hop or two: confirmed on two
// hops, a barge-in was heard 220 to 600 ms late in 4 of 24 runs of
// TestBargeInOverEcho's settings; on four, a point came 80 ms late in 2
// of 14 runs, as often as without realigning (2 of 15).
const (
	driftEarlier = 8 // hops
	driftLater   = 8
	driftConfirm = 4
)

// A client whose playout stalled (a busy phone, a browser on a starved
// machine) plays the rest of the answer that much later, 100 ms and more
// at once, and one whose jitter buffer shrinks plays it sooner: beyond
// the delays drift looks at first. Every other delay is tried too, on a
// longer run (farConfirm, 80 ms), and moved to only where farWidth
// delays next to each other explain it: an echo is explained by each
// delay whose taps cover its own, while the one far delay that explained
// a user's question over a speakerphone's loud echo (-3 dB) by chance,
// and took it for echo, stood alone (TestUserHeardOverEcho).
const (
	farConfirm = 8
	farWidth   = 4
)

// drift counts, for each delay, the hops that the locked delay left
// unexplained and it explained, since the last hop with sound it did
// not explain. An echo that moved sits inside the taps of several
// neighbouring delays at once (a window of five hops), and which of them
// explains a hop best is chance: the run is each delay's, not the best
// one's. Following the best one (give or take a hop), a 40 ms later echo
// at 100 ms, -3 dB was never followed on one machine's rendering of the
// test speech, its votes wandering among offsets 1 to 8, and started
// speech a second on.
//
// A hop the locked delay explains too breaks no run: an echo that came
// 40 ms sooner is still explained, but for its onsets, by the locked
// delay's wider judgement (tapsEarly), and runs broken at each of those
// hops never grew, while each onset went through as the user's voice
// (TestEchoLaterMidAnswer).
type drift struct {
	run [maxLag + 1]uint8
}

// realign judges a hop with sound against the delays other than the
// locked one. Once a delay has explained driftConfirm hops the locked
// one did not (farConfirm away from the locked one), and all hops with
// sound since, the path moves to the middle of the delays that did (a
// later one of two), h is predicted there, and realign says it moved.
// unexplainedHop: the locked delay leaves this hop unexplained.
func (s *Suppressor) realign(w *work, k int64, over float64, h *heardHop, unexplainedHop bool) bool {
	d := w.est.delay
	longest := uint8(0)
	for l := range w.drift.run {
		r := &w.drift.run[l]
		if l == d || (*r == 0 && !unexplainedHop) {
			// A run starts only at a hop the locked delay leaves
			// unexplained.
			continue
		}
		echo := w.path.bandsAt(w.refs, k, l)
		switch {
		case unexplainedShare(&h.power, &echo, over) >= unexplained:
			*r = 0
		case unexplainedHop && *r < 255:
			*r++
		}
		if int(*r) >= confirmAt(l-d) {
			longest = max(longest, *r)
		}
	}
	if longest == 0 {
		return false
	}
	first, last := -1, -1
	for l, r := range w.drift.run {
		if r == longest && int(r) >= confirmAt(l-d) {
			if first < 0 {
				first = l
			}
			last = l
		}
	}
	l := (first + last + 1) / 2
	if l == d {
		// The delays that explain it lie on both sides of the locked
		// one: the echo has not moved.
		return false
	}
	if !near(l-d) && !w.drift.wide(l) {
		return false
	}
	w.est.shift(l - d)
	w.drift = drift{}
	h.echo, h.bound, h.judged = w.path.predict(w.refs, k, l, &h.echoBins)
	return true
}

// wide is whether l and the delays around it that explain as long as a
// far move needs are farWidth or more next to each other.
func (dr *drift) wide(l int) bool {
	if dr.run[l] < farConfirm {
		return false
	}
	first, last := l, l
	for first > 0 && dr.run[first-1] >= farConfirm {
		first--
	}
	for last < maxLag && dr.run[last+1] >= farConfirm {
		last++
	}
	return last-first+1 >= farWidth
}

// confirmAt is how many hops a delay off hops from the locked one must
// explain that the locked one did not, before the path moves there.
func confirmAt(off int) int {
	if near(off) {
		return driftConfirm
	}
	return farConfirm
}

// near is whether a delay off hops from the locked one is where a
// jitter buffer's drift takes the echo.
func near(off int) bool { return off >= -driftEarlier && off <= driftLater }

// bandsAt is the echo's power in each band at reference hop k through a
// path of delay d, as predict has it, without its bins: what realign
// tries at each delay.
func (p *path) bandsAt(refs *refCache, k int64, d int) (echo powers) {
	for j := -tapsBefore; j <= tapsAfter; j++ {
		for b, v := range refs.at(k - int64(d+j)).power {
			echo[b] = max(echo[b], float64(v))
		}
	}
	for b := range echo {
		echo[b] *= p.gain[b]
	}
	return echo
}

// unexplainedShare is the part of a hop's sound m that the echo does
// not explain, a band's sound explained up to over times its echo.
func unexplainedShare(m, echo *powers, over float64) float64 {
	var total, left float64
	for b := range m {
		total += m[b]
		left += max(0, m[b]-over*echo[b])
	}
	return left / max(total, 1e-9)
}
