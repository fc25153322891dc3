package echo

// A client's jitter buffer grows when its network gets worse, and the
// echo then comes back later than the delay the estimator locked: over
// LiveKit, 40 to 60 ms later within the first seconds of a call. The
// estimator's correlations span a second, so it moved to the new delay a
// second or so later; until then the echo's syllables were predicted
// before they came, and what was left of them started speech that paused
// the agent (TestEchoLaterMidAnswer). A hop the locked delay does not
// explain is therefore tried at the delays around it: a delay that
// explains driftConfirm hops in a row (40 ms) is where the echo now
// comes, and the path moves there, gains and all. A user's voice may
// sit under the agent's at some lag for a hop or two: confirmed on two
// hops, a barge-in was heard 220 to 600 ms late in 4 of 24 runs of
// TestBargeInOverEcho's settings; on four, a point came 80 ms late in 2
// of 14 runs, as often as without realigning (2 of 15).
const (
	driftEarlier = 6 // hops
	driftLater   = 8
	driftConfirm = 4
)

// drift counts, for each delay around the locked one, the hops in a row
// that it explains and the locked delay does not. An echo that moved
// sits inside the taps of several neighbouring delays at once (a window
// of five hops), and which of them explains a hop best is chance: the
// run is each delay's, not the best one's. Following the best one
// (give or take a hop), a 40 ms later echo at 100 ms, -3 dB was never
// followed on one machine's rendering of the test speech, its votes
// wandering among offsets 1 to 8, and started speech a second on.
type drift struct {
	run [driftEarlier + driftLater + 1]uint8
}

// realign judges a hop that the locked delay leaves unexplained against
// the delays around it. Once some delay has explained driftConfirm hops
// in a row, the path moves to the middle of the delays that did (a later
// one of two), h is predicted there, and realign says it moved.
func (s *Suppressor) realign(w *work, k int64, over float64, h *heardHop) bool {
	d := w.est.delay
	longest := uint8(0)
	for i := range w.drift.run {
		off := i - driftEarlier
		explains := false
		if off != 0 && d+off >= 0 && d+off <= maxLag {
			echo := w.path.bandsAt(w.refs, k, d+off)
			explains = unexplainedShare(&h.power, &echo, over) < unexplained
		}
		if !explains {
			w.drift.run[i] = 0
			continue
		}
		w.drift.run[i]++
		longest = max(longest, w.drift.run[i])
	}
	if longest < driftConfirm {
		return false
	}
	first, last := -1, -1
	for i, r := range w.drift.run {
		if r == longest {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	off := (first+last+1)/2 - driftEarlier
	if off == 0 {
		// The delays that explain it lie on both sides of the locked
		// one: the echo has not moved.
		return false
	}
	w.est.shift(off)
	w.drift = drift{}
	h.echo, h.bound, h.judged = w.path.predict(w.refs, k, d+off, &h.echoBins)
	return true
}

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
