package voice

import "math"

// Speech has pitch and noise has none. While the vocal folds vibrate,
// the waveform repeats every pitch period, 2.5 to 16.7 ms (400 to
// 60 Hz), and every word has such voice within its first 100 to 200 ms
// (a vowel after "s", "st" or "wh"). A cough, a click, a door, breath or
// a burst of noise does not repeat: the WebRTC VAD, which judges a
// frame by the energy in its frequency bands, calls loud noise voice,
// but none of it has a period. So the endpointer confirms a sound as
// speech once its voice has pitch, and talk over the agent pauses it
// only then (interrupt.go).

// The analysis runs at 8 kHz: a voice's pitch and the harmonics that
// carry it are below 4 kHz, and half the samples make it four times
// cheaper.
const (
	pitchRate = InputRate / 2
	// minLag and maxLag are the periods of a 400 Hz and a 60 Hz voice.
	minLag = pitchRate / 400
	maxLag = pitchRate / 60
	// pitchWindow is two frames, the current one and the one before:
	// room for a segment and the one the longest period before it.
	pitchWindow = 2 * FrameSamples / 2
	// pitchSegment is the window's last 12.5 ms, the newest sound,
	// compared with the 12.5 ms a period before it. A vowel's pitch
	// glides, by 15% in 20 ms at the stressed "Stop," of a sentence:
	// over a longer segment its period no longer lines up with itself,
	// and that "Stop," waited 60 ms longer for its pitch. Shorter, the
	// ring of a knock begins to look periodic (TestPeriodicity).
	pitchSegment = 100
	// echoSegment is the window's first 23 ms, compared with the 23 ms
	// a period later: the stricter measure, for a microphone that may
	// carry what is left of the agent's echo. Fragments of the agent's
	// own voice that get through are voice too: with the short segment
	// over the echo as well, the bench's speakerphones paused the agent
	// for them and resumed it as often or more (a median of 7 a run,
	// once 31, against 6; docs/voice.md). A frame the suppressor heard
	// as double talk (sound its echo leaves unexplained) is the user's,
	// and is measured as over no echo (ear.go): the "Stop," of
	// TestBargeInOverEcho then has pitch 10 to 28 ms later on average
	// than over no echo, against 51 to 59 ms always measured strictly,
	// and no moved echo of BenchmarkEchoMoves's 480 was taken for
	// speech either way.
	echoSegment = pitchWindow - maxLag - 1
)

// minPeriodicity is how alike a segment and the one a pitch period
// before must be for a frame to have pitch. Measured on 16 kHz audio
// (TestPeriodicity): espeak-ng's words, in a low and a high voice, and
// a hummed "mm-hm" reach 0.88 to 1; white and pink noise, a cough-like
// burst and clicks stay under 0.42, knocks and the boom of brown noise
// under 0.55.
const minPeriodicity = 0.6

// Speech is confirmed by two windows 20 ms apart with pitch, 60 ms of
// a period: more than the ring of a knock, less than any vowel. Each
// must reach minFramePeriodicity and the two minPeriodicity on average:
// the short vowel of a "stop" said over the agent's echo, whose remains
// blur its period a little, may measure 0.74 then 0.59 and would
// otherwise wait for the next vowel, half a second later
// (TestBargeInOverEcho), while two windows of the most periodic noise,
// at 0.55, stay under the average. One window of strongPeriodicity is enough where
// its level is steady: the first 40 ms of a vowel often reach it, where
// the next window, a little into its glide, does not (a "stop" said at
// 175 words a minute waited for its next word). No noise of
// TestPeriodicity's comes near it but the ring of a knock on its way
// down from the knock, which the steady level leaves out.
const (
	minFramePeriodicity = 0.5
	strongPeriodicity   = 0.8
)

// pitchWindows is how many windows a frame's pitch is measured in,
// ending 5, 10, 15 and 20 ms into it.
const pitchWindows = 4

// pitchTrack is the periodicity of the windows that ended in the frame
// before (0 for none, or no voice).
type pitchTrack [pitchWindows]float64

// confirm measures the pitch of a frame until the sound it belongs to,
// speech frames of voice so far, is known to be speech, and says
// whether it became known with this frame. Only the voice of sounds not
// yet confirmed is measured, a few frames per utterance, so that the
// measure costs next to nothing beside the VAD, which judges every
// frame.
//
// Windows are measured every 5 ms, four per frame. At a vowel's onset,
// where its level still grows period by period, a window's periodicity
// swings by as much as 0.5 with where its end falls between two glottal
// pulses. Measured every 10 ms, the same "Stop," was confirmed 148 to
// 212 ms after its first sound, by where in a frame it began and whether
// Opus had coded it (which delays it by 6.5 ms and blurs its first
// periods); every 5 ms, 148 to 192 (TestEndpointerHearsAStopFromItsHiss).
// A window is measured only where all of it is voice: one that begins
// in a client's digital silence rings with the filter's start and can
// measure 1.
func (e *Endpointer) confirm(frame []int16, speech int) bool {
	if e.confirmed {
		return false
	}
	var now pitchTrack
	pitched := false
	for k := range now {
		end := (k + 1) * FrameSamples / pitchWindows
		reach := 2 // the frames the window reaches into
		if end < FrameSamples {
			reach = 3
		}
		if mask := uint8(1)<<reach - 1; e.recent&mask != mask {
			continue
		}
		now[k] = windowPeriodicity(e.before, e.prev, frame, end, e.echoed)
		pitched = pitched || now[k] >= strongPeriodicity && e.steady(reach) || pitchedPair(e.pitch[k], now[k])
	}
	e.pitch = now
	e.confirmed = pitched || speech >= frames(e.cfg.UnpitchedSpeech)
	return e.confirmed
}

// steady: the last n frames' levels are within 12 dB of each other.
func (e *Endpointer) steady(n int) bool {
	lo, hi := e.levels[0], e.levels[0]
	for _, l := range e.levels[1:n] {
		lo, hi = min(lo, l), max(hi, l)
	}
	return 4*lo >= hi
}

// pitchedPair: two windows 20 ms apart both have pitch.
func pitchedPair(a, b float64) bool {
	return min(a, b) >= minFramePeriodicity && a+b >= 2*minPeriodicity
}

// windowPeriodicity is the periodicity of the window of two frames'
// length that ends end samples into cur: the last samples of before
// from end on, prev, and cur up to end.
func windowPeriodicity(before, prev, cur []int16, end int, echoed bool) float64 {
	if end == len(cur) {
		return periodicity(prev, cur, echoed)
	}
	var w [2 * FrameSamples]int16
	n := copy(w[:], before[end:])
	n += copy(w[n:], prev)
	copy(w[n:], cur[:end])
	return periodicity(w[:FrameSamples], w[FrameSamples:], echoed)
}

// periodicity is how strongly the sound of prev and cur, two frames in a
// row, repeats at a voice's pitch period: the highest peak of the
// normalised correlation of its last pitchSegment with the one a lag
// before (echoed: of its first echoSegment with the one a lag later),
// at lags of 2.5 to 16.7 ms, from 0 (noise) to 1 (a steady vowel). Only
// a peak counts, a lag more alike than its neighbours: the slow sway of
// a rumble or of pink noise makes every short lag alike, and has no
// peak. The newest sound is the one compared: at an onset it is the
// vowel, where the window's start still holds the consonant.
func periodicity(prev, cur []int16, echoed bool) float64 {
	var x [pitchWindow]float64
	decimate(x[:], prev, cur)
	// The mean goes first, so that the filter, starting from rest, does
	// not ring on a microphone's offset.
	var mean float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(pitchWindow)
	for i := range x {
		x[i] -= mean
	}
	filter(x[:])
	// seg is the segment compared, at fixed; the other starts step·lag
	// from it.
	n, fixed, step := pitchSegment, pitchWindow-pitchSegment, -1
	if echoed {
		n, fixed, step = echoSegment, 0, 1
	}
	seg := x[fixed : fixed+n]
	var r [maxLag + 2]float64
	e0 := energy(seg)
	at := fixed + step*(minLag-1)
	el := energy(x[at : at+n])
	for lag := minLag - 1; lag <= maxLag+1; lag++ {
		if e0 > 0 && el > 0 {
			r[lag] = dotProduct(seg, x[at:at+n]) / math.Sqrt(e0*el)
		}
		if lag <= maxLag {
			// The other segment slides by one sample.
			out, in := at, at+n
			if step < 0 {
				out, in = at+n-1, at-1
			}
			el += x[in]*x[in] - x[out]*x[out]
			at += step
		}
	}
	best := 0.0
	for lag := minLag; lag <= maxLag; lag++ {
		if r[lag] > r[lag-1] && r[lag] >= r[lag+1] {
			best = max(best, r[lag])
		}
	}
	return best
}

// decimate halves the rate of prev and cur, two frames in a row, into
// out, low-passed by a [1 2 1] filter (nothing left at 8 kHz) so that
// the frication above 4 kHz does not fold onto the voice.
func decimate(out []float64, prev, cur []int16) {
	at := func(k int) float64 {
		if k < len(prev) {
			return float64(prev[k])
		}
		return float64(cur[k-len(prev)])
	}
	for i := range out {
		j := 2 * i
		out[i] = at(max(j-1, 0)) + 2*at(j) + at(j+1)
	}
}

// dotProduct is the sum of a[i]·b[i]; four sums run side by side, which
// makes it about twice as fast as one.
func dotProduct(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

func energy(s []float64) float64 {
	var e float64
	for _, v := range s {
		e += v * v
	}
	return e
}

// highPass is a second-order Butterworth high-pass at 300 Hz, at
// pitchRate (the RBJ cookbook's). It takes off what is below a
// telephone's band: the boom of a door or of a passing lorry, and the
// sway of brown and pink noise, whose slow waves look periodic over
// 40 ms. A voice keeps its period in the harmonics above, as it does on
// the telephone.
var highPass = func() [5]float64 {
	w := 2 * math.Pi * 300 / pitchRate
	alpha := math.Sin(w) / math.Sqrt2
	a0 := 1 + alpha
	c := math.Cos(w)
	return [5]float64{(1 + c) / 2 / a0, -(1 + c) / a0, (1 + c) / 2 / a0, -2 * c / a0, (1 - alpha) / a0}
}()

// filter runs x through highPass in place, from rest.
func filter(x []float64) {
	b0, b1, b2, a1, a2 := highPass[0], highPass[1], highPass[2], highPass[3], highPass[4]
	var x1, x2, y1, y2 float64
	for i, v := range x {
		y := b0*v + b1*x1 + b2*x2 - a1*y1 - a2*y2
		x2, x1 = x1, v
		y2, y1 = y1, y
		x[i] = y
	}
}
