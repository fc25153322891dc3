package echo

import "math"

// The spectra are short-time: a window of 20 ms every 10 ms, at any
// rate, so that a bin is 50 Hz wide at the microphone's 16 kHz and at
// the agent's track rate alike, and a band is the same bins in both.
const (
	hopDuration = 10 // ms
	binHz       = 50
	// Rate is the microphone's sample rate, hop and frame its samples
	// per hop and per window.
	Rate  = 16000
	hop   = Rate * hopDuration / 1000
	frame = 2 * hop
)

// bandEdges are the bands' lower bins, about a critical band wide (and
// two bins at least); the last band goes to the microphone's Nyquist
// frequency, 8 kHz, bin 160. The echo is estimated and removed band by
// band: an echo twice coded by Opus, whose CELT layer keeps each band's
// energy and not its waveform, keeps no phase a linear canceller could
// follow, but it keeps the bands' energies.
var bandEdges = [...]int{0, 2, 4, 6, 8, 10, 13, 16, 19, 22, 26, 30, 35, 40, 47, 54, 63, 74, 88, 106, 128, 161}

const bands = len(bandEdges) - 1

// bins are the 50 Hz bins up to 8 kHz: the microphone's whole spectrum.
const bins = frame/2 + 1

// bandOf is each bin's band.
var bandOf = func() (b [bins]int) {
	for i := range b {
		for bandEdges[b[i]+1] <= i {
			b[i]++
		}
	}
	return b
}()

// spectrum is a frame's power in each bin up to 8 kHz, as band powers
// are counted: the finer picture, in which two voices' harmonics part.
type spectrum [bins]float64

// powers are a frame's energies by band, as mean squares of 16-bit
// samples: comparable at any rate.
type powers [bands]float64

// broadBands of a voice's bands are within broadRange of its loudest.
// Every hop of espeak-ng's speech had 10 to 21 so (18 at the median); the
// thinking cue's tone of two partials 5 to 8 with its window's leakage.
const (
	broadBands = 9
	broadRange = 1e-4 // 40 dB
)

// broad says whether the powers are spread as a voice's are.
func (p *powers) broad() bool {
	top := 0.0
	for _, v := range p {
		top = max(top, v)
	}
	n := 0
	for _, v := range p {
		if v > 0 && v >= top*broadRange {
			n++
		}
	}
	return n >= broadBands
}

func (p *powers) total() float64 {
	var s float64
	for _, v := range p {
		s += v
	}
	return s
}

// floorDB is the lowest band level a feature takes (dB of a 16-bit full
// scale): a band of the quietest sound the endpointer hears (-60 dBFS
// over 8 kHz) is about -73 dB.
const floorDB = -80

// levels are powers in dB, floored.
type levels [bands]float64

func (p *powers) levels() (l levels) {
	for b, v := range p {
		l[b] = max(floorDB, powerDB(v))
	}
	return l
}

// powerDB is a mean square in dB of a 16-bit full scale.
func powerDB(p float64) float64 { return 10 * math.Log10(p/(32768*32768)+1e-20) }

// analyser takes short-time spectra of one signal at one rate, with a
// square-root Hann window, which is also the synthesis window: the two
// make a Hann window, whose frames half overlapping add up to one, so a
// frame left as it is comes out as it went in.
type analyser struct {
	n      int
	fft    *realFFT
	window []float32
	buf    []float32
	coef   []complex64
	// norm makes a band's bin energies its mean square (4/n²: the window's
	// mean square is a half, and a real signal's power lies half in the
	// bins not kept).
	norm float64
}

// hopSamples is a hop's samples at rate; whole says they are a whole
// number (rate a multiple of 100 Hz, as Opus's rates and 44.1 kHz are).
// Only then is a hop the same span at every rate, and a window, two hops,
// an even number of samples, as the real transform needs.
func hopSamples(rate int) (n int, whole bool) {
	return rate * hopDuration / 1000, rate*hopDuration%1000 == 0
}

// newAnalyser takes spectra at rate, whose hops are whole (hopSamples).
func newAnalyser(rate int) *analyser {
	per, _ := hopSamples(rate)
	n := 2 * per
	a := &analyser{n: n, fft: newRealFFT(n), window: make([]float32, n), buf: make([]float32, n),
		coef: make([]complex64, n/2+1), norm: 4 / float64(n*n)}
	for i := range a.window {
		a.window[i] = float32(math.Sin(math.Pi * float64(i) / float64(n)))
	}
	return a
}

// analyse windows a.buf (the frame, put there by the caller) and takes
// its spectrum into a.coef, its bins' powers into sp and its bands' into
// p.
func (a *analyser) analyse(sp *spectrum, p *powers) {
	for i, w := range a.window {
		a.buf[i] *= w
	}
	a.fft.forward(a.coef, a.buf)
	*p = powers{}
	for i := range min(bins, len(a.coef)) {
		re, im := float64(real(a.coef[i])), float64(imag(a.coef[i]))
		sp[i] = (re*re + im*im) * a.norm
		p[bandOf[i]] += sp[i]
	}
	for i := len(a.coef); i < bins; i++ {
		sp[i] = 0
	}
}

// synthesise applies a gain per bin to the spectrum a.coef and leaves
// the windowed frame it makes in a.buf, to be overlapped and added.
func (a *analyser) synthesise(gain *spectrum) {
	for i := range min(bins, len(a.coef)) {
		a.coef[i] *= complex(float32(gain[i]), 0)
	}
	a.fft.inverse(a.buf, a.coef)
	scale := 1 / float32(a.n)
	for i, w := range a.window {
		a.buf[i] *= w * scale
	}
}

// bandNoise is the room's noise by band, the mean of the quiet frames'
// powers. A band's sound up to noiseOver times it is explained (the
// noise, not the user), the path's gains are learnt from what is over it,
// and the levels the echo's delay is found by are floored
// noiseOver over it: a band no louder than that holds the noise's own
// rises and falls, which follow nothing of the agent's. Unfloored, in a
// room 9.5 dB louder than the tests' (-45.5 dBFS), they held the
// correlation at the echo's delay to 0.29 to 0.36 over the first answer's
// first 40 hops of sound, under the 0.5 that tells an echo from a user
// talking, and the microphone was taken for one without echo: the echo of
// a -10 dB path then went through and started speech 3 times an answer
// (BenchmarkEchoInNoisyRoom).
type bandNoise struct {
	power powers
	set   bool
}

// noiseFollow is how much of each quiet frame the mean takes: a time
// constant of 20 quiet hops.
const noiseFollow = 0.05

// noiseOver is how far over the room's mean noise a band may stand and
// still be that noise: 6 dB, as the frames judged quiet. Over LiveKit in
// a room 9.5 dB noisier than the tests', the ends of the echo's
// syllables, where it falls into the noise, were 6 to 10% unexplained
// without it, and the drift moved the path on them, 40 ms later about
// every second, from 130 to 470 ms (TestEchoOverLiveKit).
const noiseOver = 4.0

func (n *bandNoise) add(p *powers) {
	if !n.set {
		n.power, n.set = *p, true
		return
	}
	for b, v := range p {
		n.power[b] += noiseFollow * (v - n.power[b])
	}
}

// floored are the levels of p, each floored over its band's noise.
func (n *bandNoise) floored(p *powers) (l levels) {
	l = p.levels()
	if !n.set {
		return l
	}
	for b := range l {
		l[b] = max(l[b], powerDB(noiseOver*n.power[b]))
	}
	return l
}
