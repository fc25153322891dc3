package voice

import (
	"math"
	"time"
)

// FrameDuration is the unit the endpointer works in; the WebRTC VAD
// accepts 10, 20 or 30 ms frames.
const FrameDuration = 20 * time.Millisecond

// FrameSamples is one frame at InputRate.
const FrameSamples = InputRate * int(FrameDuration/time.Millisecond) / 1000

// frames is how many frames d takes, rounded up.
func frames(d time.Duration) int { return int((d + FrameDuration - 1) / FrameDuration) }

// Framer cuts a stream of samples of any chunk size into whole frames.
type Framer struct{ buf []int16 }

// Write adds samples and returns the whole frames they complete.
func (f *Framer) Write(s []int16) [][]int16 {
	f.buf = append(f.buf, s...)
	var out [][]int16
	for len(f.buf) >= FrameSamples {
		out = append(out, append([]int16(nil), f.buf[:FrameSamples]...))
		f.buf = f.buf[FrameSamples:]
	}
	// Keep the backing array from growing without bound.
	f.buf = append([]int16(nil), f.buf...)
	return out
}

// minLevel is about -60 dBFS: quieter than that is silence whatever the
// VAD thinks.
const minLevel = 32

func rms(s []int16) float64 {
	var sum float64
	for _, v := range s {
		sum += float64(v) * float64(v)
	}
	return math.Sqrt(sum / float64(len(s)))
}

func dbfs(level float64) float64 {
	if level <= 0 {
		return -120
	}
	return 20 * math.Log10(level/32768)
}

func fromDBFS(db float64) float64 { return 32768 * math.Pow(10, db/20) }
