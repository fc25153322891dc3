package echo

// A client's jitter buffer grows when its network gets worse, and the
// echo then comes back later than the delay the estimator locked: over
// LiveKit, 40 to 60 ms later within the first seconds of a call. The
// estimator's correlations span a second, so it moved to the new delay a
// second or so later; until then the echo's syllables were predicted
// before they came, and what was left of them started speech that paused
// the agent (TestEchoLaterMidAnswer). A hop the locked delay does not
// explain is therefore tried at the delays around it: one that the same
// other delay (give or take a hop) explains for driftConfirm hops in a
// row (40 ms) is the echo come at that delay, and the path moves there,
// gains and all. A user's voice may sit under the agent's at some lag
// for a hop or two: confirmed on two hops, a barge-in was heard 220 to
// 600 ms late in 4 of 24 runs of TestBargeInOverEcho's settings; on four,
// a point came 80 ms late in 2 of 14 runs, as often as without
// realigning (2 of 15).
const (
	driftEarlier = 6 // hops
	driftLater   = 8
	driftConfirm = 4
)

// drift is the run of hops the locked delay did not explain and another
// did: off is that delay's offset from the locked one, run how many hops.
type drift struct {
	off, run int
}

// realign judges a hop that the locked delay leaves unexplained against
// the delays around it. Once one delay has explained driftConfirm hops
// in a row, h is predicted there, and the path moves to it.
func (s *Suppressor) realign(w *work, k int64, over float64, h *heardHop) {
	d := w.est.delay
	best, bestShare := 0, unexplained
	for off := -driftEarlier; off <= driftLater; off++ {
		if off == 0 || d+off < 0 || d+off > maxLag {
			continue
		}
		echo := w.path.bandsAt(w.refs, k, d+off)
		if sh := unexplainedShare(&h.power, &echo, over); sh < bestShare {
			best, bestShare = off, sh
		}
	}
	switch {
	case best == 0:
		w.drift = drift{}
		return
	case w.drift.run > 0 && abs(best-w.drift.off) <= 1:
		w.drift.off, w.drift.run = best, w.drift.run+1
	default:
		w.drift = drift{off: best, run: 1}
	}
	if w.drift.run < driftConfirm {
		return
	}
	w.est.shift(best)
	w.drift = drift{}
	h.echo, h.bound, h.judged = w.path.predict(w.refs, k, d+best, &h.echoBins)
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
