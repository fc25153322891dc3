// Package speechtest renders test speech with the machine's espeak-ng and
// scores recognised text, for the voice tests of several packages.
package speechtest

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/speech/standin"
)

// Server serves the speech stand-in, recognising only phrases, for the
// test's duration, and returns its base URL (the API is under /v1).
func Server(t testing.TB, phrases ...string) string {
	t.Helper()
	sp, err := standin.New(standin.Config{Phrases: phrases, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	srv := httptest.NewServer(sp.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// Render speaks text with espeak-ng at words-per-minute rate (140 is what
// pocketsphinx recognises well) and returns it as mono PCM at sampleRate.
func Render(t testing.TB, text string, rate, sampleRate int) []int16 {
	t.Helper()
	testenv.Program(t, "espeak-ng", "Debian package espeak-ng")
	testenv.Program(t, "sox", "Debian package sox")
	pcm, err := Speak(text, rate, sampleRate)
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}

// RenderAs is Render in another of espeak-ng's voices ("en-us+f3"): a
// second speaker.
func RenderAs(t testing.TB, voice, text string, rate, sampleRate int) []int16 {
	t.Helper()
	testenv.Program(t, "espeak-ng", "Debian package espeak-ng")
	testenv.Program(t, "sox", "Debian package sox")
	pcm, err := speakAs(voice, text, rate, sampleRate)
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}

// Speak is Render for a caller that is not a test: the voice benchmark's
// users.
func Speak(text string, rate, sampleRate int) ([]int16, error) {
	return speakAs("", text, rate, sampleRate)
}

func speakAs(voice, text string, rate, sampleRate int) ([]int16, error) {
	for _, bin := range []string{"espeak-ng", "sox"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not installed (Debian packages espeak-ng, sox): %w", bin, err)
		}
	}
	opts := []string{"-s", strconv.Itoa(rate)}
	if voice != "" {
		opts = append(opts, "-v", voice)
	}
	return espeak(text, sampleRate, opts...)
}

// espeak speaks text with espeak-ng's options opts, as mono PCM at
// sampleRate.
func espeak(text string, sampleRate int, opts ...string) ([]int16, error) {
	espeak := exec.Command("espeak-ng", append(opts, "--stdout")...)
	espeak.Stdin = strings.NewReader(text)
	raw, err := espeak.Output()
	if err != nil {
		return nil, fmt.Errorf("espeak-ng: %w", err)
	}
	// Repeatable: sox dithers what it resamples, from a random seed
	// unless told, and the same phrase came out different from run to
	// run, and with it every echo and barge-in test's figures.
	sox := exec.Command("sox", "-R", "-V1", "-t", "wav", "-", "-t", "wav", "-r", strconv.Itoa(sampleRate), "-c", "1", "-b", "16", "-")
	sox.Stdin = bytes.NewReader(raw)
	conv, err := sox.Output()
	if err != nil {
		return nil, fmt.Errorf("sox: %w", err)
	}
	pcm, got, err := speech.DecodeWAV(bytes.NewReader(conv))
	if err != nil || got != sampleRate {
		return nil, fmt.Errorf("decoding rendered speech: rate %d, %v", got, err)
	}
	return pcm, nil
}

// Trim cuts the silence espeak-ng pads its speech with from both ends,
// so that the first and last samples are voice.
func Trim(pcm []int16) []int16 {
	loud := func(v int16) bool { return v > 500 || v < -500 }
	start, end := 0, len(pcm)
	for start < end && !loud(pcm[start]) {
		start++
	}
	for end > start && !loud(pcm[end-1]) {
		end--
	}
	return pcm[start:end]
}

// RMS is the root mean square of pcm, 0 for none.
func RMS(pcm []int16) float64 {
	var sum float64
	for _, v := range pcm {
		sum += float64(v) * float64(v)
	}
	return math.Sqrt(sum / float64(max(1, len(pcm))))
}

// Silence is d milliseconds of digital silence.
func Silence(ms, sampleRate int) []int16 { return make([]int16, ms*sampleRate/1000) }

// Noise is ms milliseconds of low white noise at about -50 dBFS, the
// floor of a quiet room, from a fixed seed.
func Noise(ms, sampleRate int, seed uint32) []int16 {
	out := make([]int16, ms*sampleRate/1000)
	x := seed | 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		out[i] = int16(int32(x%201) - 100)
	}
	return out
}

// Click is a loud broadband burst of ms milliseconds: a knock, a cough.
func Click(ms, sampleRate int) []int16 {
	out := make([]int16, ms*sampleRate/1000)
	x := uint32(2463534242)
	for i := range out {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		out[i] = int16(int32(x%20001) - 10000)
	}
	return out
}

// Hum is ms milliseconds of a hummed "mm-hm": a voiced sound, harmonics
// of a 130 Hz voice in two syllables, loud enough for any VAD, with no
// word in it.
func Hum(ms, sampleRate int) []int16 {
	out := make([]int16, ms*sampleRate/1000)
	for i := range out {
		t := float64(i) / float64(sampleRate)
		pos := float64(i) / float64(len(out))
		// Two syllables, each rising and falling, a short dip between.
		env := math.Sin(math.Pi * math.Mod(pos*2, 1))
		f0 := 130 * (1 + 0.08*pos)
		var v float64
		for h := 1; h <= 6; h++ {
			v += math.Sin(2*math.Pi*f0*float64(h)*t) / float64(h)
		}
		out[i] = int16(5000 * env * v)
	}
	return out
}

// MmHm is a listener's "mm-hm" in espeak-ng's voice at sampleRate, with
// espeak-ng's silence around it. It is given as phonemes (a long m, h, a
// long m): the written "mm-hm" espeak-ng spells out as the letters M, M,
// H, M, which are words and last over a second, an interruption by any
// measure.
func MmHm(t testing.TB, sampleRate int) []int16 {
	t.Helper()
	return Render(t, "[[m:'hm:]]", 140, sampleRate)
}

// UhHuh is a listener's "uh-huh" in espeak-ng's voice at sampleRate, with
// espeak-ng's silence around it: two words of a backchannel, short enough
// not to be an interruption by its length. It is given as phonemes
// stressed on the first syllable only, as listeners say it: espeak-ng
// stresses both syllables of the written "uh-huh", and pocketsphinx's US
// English model then hears an "ah" beside it half the time, which a
// grammar of "uh huh" does not admit: no transcript at all.
func UhHuh(t testing.TB, sampleRate int) []int16 {
	t.Helper()
	return Render(t, "[['VhV]]", 140, sampleRate)
}

// Burst is ms milliseconds of white noise whose level is dbfs (RMS; speech
// is about -20 dBFS), from a fixed seed: a clatter, a passing car, loud
// enough for a VAD to take for voice and holding no word.
func Burst(ms, sampleRate int, dbfs float64, seed uint32) []int16 {
	out := make([]int16, ms*sampleRate/1000)
	// Uniform noise on [-a, a] has an RMS of a/√3.
	a := int32(math.Min(32767, 32768*math.Pow(10, dbfs/20)*math.Sqrt(3)))
	x := seed | 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		out[i] = int16(int32(x%uint32(2*a+1)) - a)
	}
	return out
}

// WER is the word error rate of hyp against ref: word edits (insertions,
// deletions, substitutions) over the words of ref, after normalising case
// and punctuation.
func WER(ref, hyp string) float64 {
	r := strings.Fields(norm(ref))
	h := strings.Fields(norm(hyp))
	if len(r) == 0 {
		if len(h) == 0 {
			return 0
		}
		return 1
	}
	prev := make([]int, len(h)+1)
	cur := make([]int, len(h)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(r); i++ {
		cur[0] = i
		for j := 1; j <= len(h); j++ {
			sub := prev[j-1]
			if r[i-1] != h[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return float64(prev[len(h)]) / float64(len(r))
}

func norm(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'' {
			b.WriteRune(c)
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}
