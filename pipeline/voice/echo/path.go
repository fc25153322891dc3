package echo

import (
	"math"
	"slices"
)

// The echo path, once its delay is known, is a gain per band over a few
// taps of the reference around that delay: the echo in a band is at most
// its gain times the loudest of those hops. The taps cover a room's first
// reflections (within 30 ms) and a delay known to a hop.
//
// Whether a hop is the echo alone is judged against the loudest of more
// hops, from tapsEarly sooner: a client's jitter buffer shrinks in the
// silence between answers, and the next answer's echo came 20 ms sooner
// than the last one's had; predicted that late, its first syllables
// looked like a user talking over it, and paused the agent until the
// delay moved. Only the judgement: taken out or learnt from over the
// wider span, the echo's peaks were predicted short of what came. Judged
// over a hop more later too, a user's first syllables over the agent's
// were taken for its echo: confirmed as speech 620 ms late in 6 of 8 runs
// of TestBargeInOverEcho, against none with either widening alone.
const (
	tapsBefore = 1
	tapsAfter  = 3
	tapsEarly  = 3
)

// Before the path is known the echo is bounded from above: as loud as the
// loudest the agent was in each band anywhere in the window of delays, at
// unknownGain (0 dB: no louder than the agent itself).
const unknownGain = 1.0

// Suppression takes overSubtract times the predicted echo's power out of
// each bin (3 dB over: the prediction is an estimate), and leaves at least
// floorGain (-20 dB) of what was there: deeper, and what is left of the
// user's voice in double talk is too broken for a recogniser. A frame
// whose sound the echo explains but for a small share (unexplained, of
// what is over echoOnlyOver times the prediction in each band) is taken
// as echo alone: nothing of it passes, not even a band the prediction
// missed by a little. Of the frames of a double-talk test, 1% of the echo
// alone have over 0% unexplained, and 10% of the user's less than 3%.
const (
	overSubtract = 2.0
	floorGain    = 0.1
	echoOnlyOver = 4.0
	unexplained  = 0.05
)

// A frame the echo leaves unexplained for doubleTalk of its sound or
// more proves that the user talks over the agent (of the echo alone, 99%
// of the frames stay under 0.07, the worst seen at 0.6). For talkHold
// after it, a frame is taken as echo alone only if the echo explains it
// within echoOnlyTalking (3 dB) of its prediction: a user's vowel after
// their first consonant is often less than 6 dB over the predicted echo
// of a voice like theirs, and taken out whole it would hold back the
// barge-in until their next syllable, half a second later
// (TestBargeInOverEcho). Over the echo alone, no looser margin ever
// applies. A client's Opus softens the hiss of an "s": over a -3 dB echo
// at 300 ms, the coded "s" of a "Stop," left 0.38, 0.48 and 0.32 of three
// hops unexplained, never doubleTalk, its vowel was taken for echo, and
// 3 of 21 such questions started only at their next words, 830 to 850
// ms after the onset. Three hops in a row of doubleTalkRun prove double
// talk too: 2 of 21 then (BenchmarkCodedQuestionOverEcho), and the
// moved echoes that start speech stay 3 of 480 (BenchmarkEchoMoves;
// two in a row: 1 of 21, and 4 of 480).
const (
	doubleTalk      = 0.6
	doubleTalkRun   = 0.3
	doubleTalkHops  = 3
	talkHold        = 20
	echoOnlyTalking = 2.0
)

// path is the echo path's gains by band, learnt while the microphone
// carries the echo alone.
type path struct {
	gain [bands]float64
}

// predict is the echo's power in each band and bin at reference hop k
// (lag 0), through a path of delay d, the reference's bound it comes
// from in each band, and the echo a hop is judged against (tapsEarly).
func (p *path) predict(refs *refCache, k int64, d int, inBins *spectrum) (echo, bound, judged powers) {
	var early powers
	var loudest [bins]binPower
	for j := -tapsEarly; j <= tapsAfter; j++ {
		h := refs.at(k - int64(d+j))
		if j < -tapsBefore {
			for b, v := range h.power {
				early[b] = max(early[b], float64(v))
			}
			continue
		}
		for b, v := range h.power {
			bound[b] = max(bound[b], float64(v))
		}
		for i, v := range h.bins {
			loudest[i] = max(loudest[i], v)
		}
	}
	for b := range echo {
		echo[b] = p.gain[b] * bound[b]
		judged[b] = p.gain[b] * max(bound[b], early[b])
	}
	for i, v := range loudest {
		inBins[i] = v.float() * p.gain[bandOf[i]]
	}
	return echo, bound, judged
}

// upperBound is the loudest echo any delay could bring at hop k.
func upperBound(refs *refCache, k int64) (echo powers) {
	for l := int64(-tapsBefore); l <= maxLag+tapsAfter; l++ {
		h := refs.at(k - l)
		if !h.loud {
			continue
		}
		for b, v := range h.power {
			echo[b] = max(echo[b], unknownGain*float64(v))
		}
	}
	return echo
}

// loudBand is a reference band's least power for its gain to be learnt
// (-70 dB): below it a band's ratio is noise over nothing.
var loudBand = 32768 * 32768 * math.Pow(10, -7)

// adapt learns the gains from a hop's microphone powers m and the
// reference's bound at the delay, while the microphone carries the echo
// alone: each gain follows a high quantile of the ratios (up quickly,
// down slowly), for the echo must be predicted no lower than it comes,
// or what is left of it sounds like speech. In double talk the gains
// hold: the user's voice says nothing of the echo's.
//
// A hop counts as at most maxFall under the gain, and maxRise over it.
// A band far under its prediction is mostly an echo that has not come
// yet: a client's jitter buffer grew, and the echo now comes later than
// the locked delay. Taken at its word, each such hop lowered the gains a
// little more while the drift was still unconfirmed, and the echo, when
// it came, stood 6 dB over its prediction in the low bands and started
// speech (a browser
// whose playout a busy machine delayed, 0.7 s into an answer;
// TestEchoLaterMidAnswer 1 s in).
func (p *path) adapt(m, bound *powers) {
	for b := range p.gain {
		if bound[b] < loudBand || m[b] <= 0 {
			continue
		}
		lg := math.Log(p.gain[b])
		lr := min(max(math.Log(m[b]/bound[b]), lg-maxFall), lg+maxRise)
		if lr > lg {
			lg += 0.15 * (lr - lg)
		} else {
			lg += 0.03 * (lr - lg)
		}
		p.gain[b] = math.Exp(lg)
	}
}

// learn sets the gains, once the delay is known, from the hops heard so
// far: a high quantile of each band's ratios of microphone to reference,
// over the hops where the reference was loud in that band. now is the
// reference hop at lag 0 of the hop heard last: older hops than the
// cache keeps are passed over. It keeps the gains it had, and says so,
// if a band's comes out over maxGain: no echo comes back 10 dB louder
// than the agent's voice, but a user's own speech found at a lag where
// the agent happened to be quiet does (gains of 50 to 8000 for a user
// who talked over the first words of the first answer). The echo's
// power in a band is the microphone's less the room's noise there
// (noise). Learnt from the microphone's powers whole, the echo at 300
// ms, -10 dB in a room 9.5 dB louder than the tests' was never locked on
// (BenchmarkEchoInNoisyRoom, the noise added after the codec: 3 starts
// of speech an answer, 0 with the noise taken off).
func (p *path) learn(mics *micHistory, refs *refCache, noise *powers, d int, now int64) bool {
	var ratios [bands][learnHops]float64
	var n [bands]int
	for i := range mics.n {
		h := mics.at(i)
		if h.k-int64(d+tapsAfter) <= now-cacheHops {
			continue
		}
		var sp spectrum
		_, bound, _ := p.predict(refs, h.k, d, &sp)
		for b := range bands {
			if e := float64(h.power[b]) - noise[b]; bound[b] >= loudBand && e > 0 {
				ratios[b][n[b]] = e / bound[b]
				n[b]++
			}
		}
	}
	var gain [bands]float64
	for b := range gain {
		gain[b] = unknownGain
		if n[b] == 0 {
			continue
		}
		r := ratios[b][:n[b]]
		slices.Sort(r)
		if gain[b] = r[n[b]*3/4]; gain[b] > maxGain {
			return false
		}
	}
	p.gain = gain
	return true
}

// maxGain is the loudest an echo path may bring a band back: +10 dB.
const maxGain = 10.0

// maxFall is the most a hop's ratio counts under the gain, as a natural
// log: 6 dB. A path that really got quieter is still followed, 0.18 dB a
// hop; the quantile the gains follow stays where it was (at 3 dB, a user
// talking over a -3 dB echo was taken for it, and heard 580 ms late).
const maxFall = 0.6 * math.Ln10

// maxRise is the most a hop's ratio counts over the gain, as a natural
// log: 6 dB, the margin of echo alone. A hop is taken for the echo alone
// when what the echo leaves unexplained is a small share of its power,
// so a quiet band in it may stand far over its prediction: the "h" of a
// user's "How far is the moon?" over a -3 dB echo, 21 to 28 dB over it
// in the bands above 5 kHz. Taken at its word, it raised the 5.3 to 6.4
// kHz band's gain by 7 dB in 80 ms; the echo then seemed gone wherever
// the agent's "s" was due, far delays were judged with the looser margin,
// one explained "the moon" by chance and the path moved there, and the
// recogniser heard nothing of the question (TestUserHeardOverEcho on an
// Intel Xeon VM, every run; it passed on AMD EPYC VMs). Over LiveKit, in
// the first 300 ms of "Stop, tell me about Paris instead." over a -3 dB
// echo, hops taken for the echo alone raised the gains of the bands from
// 650 Hz to 1.5 kHz and at 3.2 to 3.7 kHz by 7 to 14 dB, and the echo
// predicted from them hid the question until 820 to 850 ms after its
// onset (replayed, 2 of 70 questions; none with the bound, under which
// those gains rose 4 to 9 dB).
const maxRise = 0.6 * math.Ln10

// micHistory is the microphone's last hops, for learn.
type micHistory struct {
	hops [learnHops]micHop
	next int
	n    int
}

// learnHops are the hops a path is first learnt from (the last second).
const learnHops = 100

type micHop struct {
	k     int64
	power [bands]float32
}

func (m *micHistory) add(k int64, p *powers) {
	h := &m.hops[m.next]
	h.k = k
	for b, v := range p {
		h.power[b] = float32(v)
	}
	m.next = (m.next + 1) % learnHops
	m.n = min(m.n+1, learnHops)
}

// at is the i-th of the hops kept, oldest first.
func (m *micHistory) at(i int) *micHop {
	return &m.hops[(m.next-m.n+i+learnHops)%learnHops]
}

// gains are the suppression gains of a hop, by bin: m and mBins are the
// microphone's powers, echoBins the predicted echo's, noise the
// microphone's noise power, and share the part of the hop's sound that
// the echo leaves unexplained, judged by bands (unexplainedShare), where
// the prediction is surest. What is taken out of a hop the echo does not
// explain is taken bin by bin, where the user's voice and the agent's
// part by their harmonics. echoOnly: the echo explains the hop's sound;
// removed: what comes out is at least 20 dB under what went in.
func gains(m *powers, mBins, echoBins *spectrum, noise, share float64) (g spectrum, echoOnly, removed bool) {
	echoOnly = share < unexplained
	var kept float64
	total := m.total()
	for i := range g {
		switch {
		case echoOnly:
			// Down to the noise, and to its flat spectrum, bin by bin: a
			// recogniser takes the echo's spectrum, however quiet, for the
			// start of a word.
			g[i] = min(1, math.Sqrt(noise/bins/max(mBins[i], 1e-9)))
		case mBins[i] <= 0:
			g[i] = 1
		default:
			g[i] = math.Sqrt(max(floorGain*floorGain, 1-overSubtract*echoBins[i]/mBins[i]))
		}
		kept += g[i] * g[i] * mBins[i]
	}
	return g, echoOnly, kept <= 0.01*total
}
