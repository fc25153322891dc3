package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"testing"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

// Sounds a user makes over the bot's answer that do not ask anything:
// backchannels, a cough, a knock.

// backchannel is a listener's sign that they follow, said to last ms.
type backchannel struct {
	word string
	ms   int
	pcm  []int16
}

func (b backchannel) String() string {
	return fmt.Sprintf("%q of %d ms (%d ms)", b.word, b.ms, len(b.pcm)*1000/voice.InputRate)
}

// backchannels are "mm-hmm", "uh-huh", "okay" and "right" in espeak-ng's
// voice, each said to last 300, 600 and 900 ms, shortest first. Most
// real ones last 400-900 ms.
func backchannels(tb testing.TB) []backchannel {
	tb.Helper()
	said := map[string][]int16{
		"mm-hmm": speechtest.MmHm(tb, voice.InputRate),
		"uh-huh": speechtest.UhHuh(tb, voice.InputRate),
		"okay":   speechtest.Render(tb, "okay", 140, voice.InputRate),
		"right":  speechtest.Render(tb, "right", 140, voice.InputRate),
	}
	var out []backchannel
	for _, ms := range []int{300, 600, 900} {
		for _, w := range []string{"mm-hmm", "uh-huh", "okay", "right"} {
			out = append(out, backchannel{w, ms, lasting(tb, said[w], ms)})
		}
	}
	return out
}

// lasting is espeak-ng's pcm, trimmed, said faster or slower to last
// about ms: sox's tempo effect keeps the pitch, as someone who says it
// quickly or draws it out.
func lasting(tb testing.TB, pcm []int16, ms int) []int16 {
	tb.Helper()
	pcm = trimmed(pcm)
	want := float64(ms * voice.InputRate / 1000)
	factor := float64(len(pcm)) / want
	out := tempo(tb, pcm, factor)
	// tempo works in overlapping segments, and trimming takes the quiet
	// ends of the result: corrected twice at most, it comes within a few
	// percent.
	for range 2 {
		if math.Abs(float64(len(out))-want) < 0.03*want {
			break
		}
		factor *= float64(len(out)) / want
		out = tempo(tb, pcm, factor)
	}
	return out
}

// tempo plays pcm factor times faster with sox, its pitch kept.
func tempo(tb testing.TB, pcm []int16, factor float64) []int16 {
	tb.Helper()
	testenv.Program(tb, "sox", "Debian package sox")
	raw := []string{"-t", "raw", "-e", "signed-integer", "-b", "16", "-c", "1", "-L", "-r", strconv.Itoa(voice.InputRate)}
	args := append(append([]string{"-R", "-V1"}, raw...), "-")
	args = append(append(args, raw...), "-", "tempo", "-s", strconv.FormatFloat(factor, 'f', 3, 64))
	in := make([]byte, 2*len(pcm))
	for i, v := range pcm {
		binary.LittleEndian.PutUint16(in[2*i:], uint16(v))
	}
	cmd := exec.Command("sox", args...)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("sox tempo %.3f: %v", factor, err)
	}
	res := make([]int16, len(out)/2)
	for i := range res {
		res[i] = int16(binary.LittleEndian.Uint16(out[2*i:]))
	}
	return trimmed(res)
}

// noiseSound is a sound over the bot that holds no voice.
type noiseSound struct {
	name string
	pcm  []int16
}

// noises are 300 ms each: a burst of white noise as loud as speech, a
// cough, and three knocks.
func noises() []noiseSound {
	return []noiseSound{
		{"burst", speechtest.Burst(300, voice.InputRate, -20, 7)},
		{"cough", cough()},
		{"knocks", knocks()},
	}
}

// cough is a cough as a microphone near it hears it: breath noise in the
// voice's band that comes at once (in 5 ms) and dies away (with a time
// constant of 80 ms), 300 ms in all, peaking at −6 dBFS.
func cough() []int16 {
	noise := bandNoise(300*voice.InputRate/1000, 1200, 0.8, 11)
	return shaped(noise, func(t float64) float64 { return min(1, t/0.005) * math.Exp(-t/0.08) }, -6)
}

// knocks are three knocks on a desk, 110 ms apart: each a click that
// rises in a millisecond and dies away in about 20 (a time constant of
// 8 ms), 300 ms in all, peaking at −3 dBFS.
func knocks() []int16 {
	noise := bandNoise(300*voice.InputRate/1000, 700, 1.2, 13)
	return shaped(noise, func(t float64) float64 {
		t = math.Mod(t, 0.110)
		return min(1, t/0.001) * math.Exp(-t/0.008)
	}, -3)
}

// bandNoise is n samples of white noise from a fixed seed through a
// band-pass biquad (the Audio EQ Cookbook's, 0 dB at its peak) at centre
// Hz, of quality q.
func bandNoise(n int, centre, q float64, seed uint32) []float64 {
	w := 2 * math.Pi * centre / voice.InputRate
	alpha := math.Sin(w) / (2 * q)
	a0 := 1 + alpha
	b0, b2 := alpha/a0, -alpha/a0
	a1, a2 := -2*math.Cos(w)/a0, (1-alpha)/a0
	out := make([]float64, n)
	var x1, x2, y1, y2 float64
	x := seed | 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		in := float64(int32(x)) / (1 << 31)
		y := b0*in + b2*x2 - a1*y1 - a2*y2
		x1, x2 = in, x1
		y1, y2 = y, y1
		out[i] = y
	}
	return out
}

// shaped is sound under the envelope env (of the time in seconds),
// scaled so that its loudest sample is at peak dBFS.
func shaped(sound []float64, env func(t float64) float64, peak float64) []int16 {
	var top float64
	for i := range sound {
		sound[i] *= env(float64(i) / voice.InputRate)
		top = max(top, math.Abs(sound[i]))
	}
	gain := 32767 * math.Pow(10, peak/20) / top
	out := make([]int16, len(sound))
	for i, v := range sound {
		out[i] = int16(v * gain)
	}
	return out
}
