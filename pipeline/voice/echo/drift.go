package echo

import "math"

// A client's jitter buffer grows when its network gets worse, and the
// echo then comes back later than the delay the estimator locked: over
// LiveKit, 40 to 60 ms later within the first seconds of a call. The
// estimator's correlations span a second, so it moved to the new delay a
// second or so later; until then the echo's syllables were predicted
// before they came, and what was left of them started speech that paused
// the agent (TestEchoLaterMidAnswer). A hop the locked delay does not
// explain is therefore tried at the delays around it: where delays
// explain driftConfirm such hops (40 ms), and every hop with sound
// between them, is where the echo now comes (target), and the path moves
// there, gains and all. A user's voice may
// sit under the agent's at some lag for a hop or two: confirmed on two
// hops, a barge-in was heard 220 to 600 ms late in 4 of 24 runs of
// TestBargeInOverEcho's settings; on four, a point came 80 ms late in 2
// of 14 runs, as often as without realigning (2 of 15).
const (
	driftEarlier = 8 // hops
	driftLater   = 8
	driftConfirm = 4
)

// While the user's speech is under way (Hold), no delay counts a hop,
// nor is its run broken: what the microphone hears then is the user's
// voice, and a user talking in the agent's own voice as loud as the
// agent is bounded by any loud stretch of it. Over LiveKit, "Stop, tell
// me about Paris instead." at 100 ms, -3 dB moved the path 650 ms
// further 430 ms after its onset, the agent paused for it by then, in
// each of 20 questions: the rest of the question was taken for echo,
// and the path came back only in the agent's next answer, 3.4 s after
// the onset, whose echo went through as speech until it did (once in
// 20, it paused the agent). At 100 ms, -10 and -3 dB, the same
// question moved it 50 to 70 ms later, 200 ms after it was confirmed,
// each of 6 times, while near delays still counted, and the path came
// back in the next answer. The agent has paused by then: there is
// little of its echo left to follow until it talks again.
//
// A client whose playout stalled (a busy phone, a browser on a starved
// machine) plays the rest of the answer that much later, 100 ms and more
// at once, and one whose jitter buffer shrinks plays it sooner: beyond
// the delays drift looks at first. Every other delay is tried too, on a
// longer run (farConfirm, 80 ms), and moved to only where farWidth
// delays next to each other explain it: an echo is explained by each
// delay whose taps cover its own, while the one far delay that explained
// a user's question over a speakerphone's loud echo (-3 dB) by chance,
// and took it for echo, stood alone (TestUserHeardOverEcho).
//
// The far delays are judged with the margin of echo alone (echoOnlyOver)
// for goneHold hops (500 ms) after the locked delay's echo was due and
// did not come: where an echo that moved left its old delay. Judged with
// the stricter margin its own first hops had set (double talk), an echo
// 150 ms later broke every far run within two hops, and went through as
// speech for 150 ms before runs begun afresh were long enough. With the
// looser margin at all times, or for near delays too, a user's question
// or "Stop" in the agent's own voice, at -3 dB under it, was explained at
// five to seven far delays next to each other for 80 ms and removed
// (TestUserHeardOverEcho, TestBargeInOverEcho).
const (
	farConfirm = 8
	farWidth   = 4
	goneHold   = 50
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
// locked one, over is the margin it is judged with. Once the delays that
// explained the hops the locked one did not, and all hops with sound
// since, show where the echo moved (target), the path moves there, gains
// and all, h is predicted there, and realign says it moved.
// unexplainedHop: the locked delay leaves this hop unexplained.
func (s *Suppressor) realign(w *work, k int64, over float64, h *heardHop, unexplainedHop bool) bool {
	if s.held {
		return false
	}
	d := w.est.delay
	for l := range w.drift.run {
		r := &w.drift.run[l]
		if l == d || (*r == 0 && !unexplainedHop) {
			// A run starts only at a hop the locked delay leaves
			// unexplained.
			continue
		}
		echo := w.path.bandsAt(w.refs, k, l)
		margin := over
		if !near(l-d) && s.taken-s.gone <= goneHold*hop {
			margin = echoOnlyOver
		}
		switch {
		case unexplainedShare(&h.power, &echo, &w.noise.power, margin) >= unexplained:
			*r = 0
		case unexplainedHop && *r < 255:
			*r++
		}
	}
	l, ok := w.drift.target(d, w.misfit)
	if !ok {
		return false
	}
	w.est.shift(l - d)
	w.drift = drift{}
	h.echo, h.bound, h.judged = w.path.predict(w.refs, k, l, &h.echoBins)
	return true
}

// target is where the echo moved from the locked delay d, if the runs
// tell. The delays next to each other with runs (blockRun and up) make a
// block, and an echo that moved lights up a whole block: which delay in
// it explains a hop best is chance, and so is where the longest runs
// are. Moved to the middle of the longest runs of the delays near d, an
// echo 150 ms later was followed to the edge of the near delays, 70 ms
// short of it, and went on through as the user's voice; an echo 80 ms
// sooner was followed to 60 ms short of it. So the path moves to the
// block's centre, each delay weighed by its run: at driftConfirm if the
// block reaches the near delays, at farConfirm and only if farWidth of
// its delays explained as long otherwise. A block wider than blockMax
// (120 ms) is sound that most delays explain, which says little of where
// the echo went: it is judged by its near delays alone, as before blocks
// (judged whole, one 300 ms wide moved the path 160 ms past an echo
// 40 ms later). Of two blocks, the one with the longer run wins (the
// wider of equals); a block around d says the echo has not moved.
//
// A near block that would move the path waits while a far block not yet
// confirmed fits the last hops better (misfit): a stretch of the agent's
// voice that most delays explain by level lights up blocks on both
// sides, and the near one, confirmed sooner, took the path the wrong way:
// an echo at 110 ms that came 250 ms later was followed to 20 ms, 340 ms
// short of it, and went through as speech, while the far block was no
// longer counted (5 of 48 such moves in BenchmarkEchoMoves, 1 once the
// near block waits).
func (dr *drift) target(d int, misfit func(l int) float64) (int, bool) {
	best, far := block{l: -1}, block{l: -1}
	for first := 0; first <= maxLag; {
		if !dr.counts(first, d) {
			first++
			continue
		}
		last := first
		for last < maxLag && dr.counts(last+1, d) {
			last++
		}
		switch b := dr.judge(first, last, d); {
		case b.ok && (b.longest > best.longest || b.longest == best.longest && b.width > best.width):
			best = b
		case !b.ok && !b.reaches && b.longest > far.longest:
			far = b
		}
		first = last + 1
	}
	if best.reaches && far.l >= 0 && misfit(far.l) < misfit(best.l) {
		return -1, false
	}
	return best.l, best.l >= 0
}

// block is a block of delays as target judges it: l where it would move
// the path, its width and longest run, whether it reaches the near
// delays, and ok if it may move the path now.
type block struct {
	l, width int
	longest  uint8
	reaches  bool
	ok       bool
}

// judge is the block of delays first to last, as a move from d.
func (dr *drift) judge(first, last, d int) block {
	b := block{width: last - first + 1, reaches: near(first-d) || near(last-d)}
	from, to := first, last
	if b.reaches && b.width > blockMax {
		from, to = max(first, d-driftEarlier), min(last, d+driftLater)
	}
	b.l, b.longest = dr.centre(from, to)
	b.ok = (first > d || last < d) && (b.reaches && b.longest >= driftConfirm || b.longest >= farConfirm && dr.wide(b.l))
	return b
}

// misfitHops are the microphone's hops with sound a delay's fit is
// judged on: about as many as a near move is confirmed on, and a few
// more.
const misfitHops = 8

// misfit is how far the microphone's last hops with sound are from the
// echo a path of delay l would bring them, in dB a band on average,
// louder or quieter. A delay explains a hop (realign) when its echo
// could be as loud as the hop, so a loud stretch of the agent's voice
// explains the quieter one that came back at most delays; only the echo
// of the right delay also rises and falls with the microphone, band by
// band.
func (w *work) misfit(l int) float64 {
	var sum float64
	n := 0
	for i := max(0, w.mics.n-misfitHops); i < w.mics.n; i++ {
		h := w.mics.at(i)
		echo := w.path.bandsAt(w.refs, h.k, l)
		for b, e := range echo {
			sum += math.Abs(max(floorDB, powerDB(float64(h.power[b]))) - max(floorDB, powerDB(e)))
			n++
		}
	}
	return sum / float64(max(n, 1))
}

// centre is the delay at the centre of the block first to last, each
// weighed by its run (a later one of two), and the block's longest run.
func (dr *drift) centre(first, last int) (l int, longest uint8) {
	sum, weighted := 0, 0
	for l := first; l <= last; l++ {
		r := dr.run[l]
		longest = max(longest, r)
		sum += int(r)
		weighted += l * int(r)
	}
	return (weighted + sum/2) / max(sum, 1), longest
}

// counts is whether delay l belongs to a block: its run reached
// blockRun, or it is the locked delay d with such runs on both sides.
// Cut only where runs are shorter than driftConfirm, the block of an
// echo 150 ms later fell apart at two delays that had missed a hop, and
// its near part, alone, moved the path short of the echo.
func (dr *drift) counts(l, d int) bool {
	if l == d {
		return l > 0 && l < maxLag && dr.run[l-1] >= blockRun && dr.run[l+1] >= blockRun
	}
	return dr.run[l] >= blockRun
}

const (
	blockRun = driftConfirm / 2
	blockMax = 12
)

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
// not explain, a band's sound explained up to over times its echo and
// noiseOver times the room's noise in it.
func unexplainedShare(m, echo, noise *powers, over float64) float64 {
	var total, left float64
	for b := range m {
		total += m[b]
		left += max(0, m[b]-over*echo[b]-noiseOver*noise[b])
	}
	return left / max(total, 1e-9)
}
