package speechtest

import (
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/speech"
)

// SoxNoise is ms milliseconds of sox's noise of the given colour
// ("whitenoise", "pinknoise", "brownnoise") at sampleRate, through the
// sox effects given (a band-pass, say), at an RMS level of dbfs. sox runs
// in its repeatable mode: the same arguments give the same samples.
func SoxNoise(t testing.TB, colour string, ms, sampleRate int, dbfs float64, effects ...string) []int16 {
	t.Helper()
	testenv.Program(t, "sox", "Debian package sox")
	args := append([]string{"-R", "-V1", "-n", "-r", strconv.Itoa(sampleRate), "-c", "1", "-b", "16", "-t", "wav", "-",
		"synth", fmt.Sprintf("%.3f", float64(ms)/1000), colour}, effects...)
	out, err := exec.Command("sox", args...).Output()
	if err != nil {
		t.Fatalf("sox %q: %v", args, err)
	}
	pcm, got, err := speech.DecodeWAV(bytes.NewReader(out))
	if err != nil || got != sampleRate {
		t.Fatalf("decoding sox's noise: rate %d, %v", got, err)
	}
	return AtLevel(pcm, dbfs)
}

// Cough is a cough-like sound of ms milliseconds at an RMS level of dbfs:
// white noise band-passed to 300–3500 Hz, as the vocal tract shapes the
// air of a cough, with a 5 ms attack and an exponential decay (a time
// constant of a quarter of its length). It holds no pitch: a cough of
// a closed glottis bursting open, not a voiced one.
func Cough(t testing.TB, ms, sampleRate int, dbfs float64) []int16 {
	t.Helper()
	pcm := SoxNoise(t, "whitenoise", ms, sampleRate, 0, "sinc", "300-3500")
	attack, tau := 0.005*float64(sampleRate), float64(ms)/4000*float64(sampleRate)
	out := make([]float64, len(pcm))
	for i, v := range pcm {
		out[i] = float64(v) * min(1, float64(i)/attack) * math.Exp(-float64(i)/tau)
	}
	return AtLevel(toPCM(out), dbfs)
}

// Knocks are n knocks on a door, every 200 ms: each a blow of a few
// milliseconds ringing in the wood for tens more, its first 20 ms at an
// RMS level of dbfs.
func Knocks(t testing.TB, n, sampleRate int, dbfs float64) []int16 {
	t.Helper()
	knock := SoxNoise(t, "whitenoise", 200, sampleRate, -20, "trim", "0", "0.004", "pad", "0", "0.196", "bandpass", "180", "3q", "bandpass", "600", "2q")
	gain := math.Pow(10, dbfs/20) * 32768 / RMS(knock[:sampleRate/50])
	var out []float64
	for range n {
		for _, v := range knock {
			out = append(out, float64(v)*gain)
		}
	}
	return toPCM(out)
}

// AtLevel scales pcm to an RMS level of dbfs, clipping what would not fit.
func AtLevel(pcm []int16, dbfs float64) []int16 {
	rms := RMS(pcm)
	if rms == 0 {
		return pcm
	}
	gain := 32768 * math.Pow(10, dbfs/20) / rms
	out := make([]float64, len(pcm))
	for i, v := range pcm {
		out[i] = float64(v) * gain
	}
	return toPCM(out)
}

func toPCM(s []float64) []int16 {
	out := make([]int16, len(s))
	for i, v := range s {
		out[i] = int16(max(-32768, min(32767, math.Round(v))))
	}
	return out
}

// RenderWith speaks text with espeak-ng's options opts (a voice, "-v
// en+whisper"; a pitch, "-p 0"; a rate, "-s 140") and returns it as mono
// PCM at sampleRate.
func RenderWith(t testing.TB, text string, sampleRate int, opts ...string) []int16 {
	t.Helper()
	testenv.Program(t, "espeak-ng", "Debian package espeak-ng")
	testenv.Program(t, "sox", "Debian package sox")
	pcm, err := espeak(text, sampleRate, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}
