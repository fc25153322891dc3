package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
)

func TestParseEcho(t *testing.T) {
	for in, want := range map[string]echoPath{
		"": {}, "off": {}, "150ms,-10dB": {delay: 150 * time.Millisecond, gain: -10}, "300ms, -3db": {delay: 300 * time.Millisecond, gain: -3},
	} {
		if got, err := parseEcho(in); err != nil || got != want {
			t.Errorf("parseEcho(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"150ms", "-10dB", "150ms,+3dB", "2s,-10dB", "fast,-10dB"} {
		if _, err := parseEcho(in); err == nil {
			t.Errorf("parseEcho(%q) took it", in)
		}
	}
}

// The speakerphone plays what the ear received into the microphone the
// delay later, quieter by the gain and muffled by the room; before, the
// microphone hears only itself. Arrivals that jitter by less than the
// delay change nothing: the speaker plays on its own clock.
func TestEchoLine(t *testing.T) {
	path := echoPath{delay: 160 * time.Millisecond, gain: -10}
	speech := speechtest.Trim(speechtest.Render(t, "tell me something about the moon", 140, opusRate))
	n := len(speech) / frameSamples
	speech = speech[:n*frameSamples]
	steady := make([]time.Duration, n)
	for i := range steady {
		steady[i] = time.Duration(i) * frame
	}
	heard := echoOf(path, speech, steady)
	lag := int(path.delay / frame * frameSamples)
	if early := speechtest.RMS(heard[:lag]); early != 0 {
		t.Errorf("the microphone heard %.0f RMS before the echo was due", early)
	}
	got, sent := speechtest.RMS(heard[lag:lag+len(speech)]), speechtest.RMS(speech)
	// The room takes off the highs and adds a reflection: a decibel or
	// two either way of the gain.
	db, c := 20*math.Log10(got/sent), correlation(heard[lag:lag+len(speech)], speech)
	t.Logf("the echo: %.1f dB, correlation with the speech %v earlier %.2f", db, path.delay, c)
	if math.Abs(db-path.gain) > 2.5 {
		t.Errorf("the echo came back at %.1f dB, want about %.0f dB", db, path.gain)
	}
	if c < 0.8 {
		t.Errorf("the echo is not the speech %v late: correlation %.2f", path.delay, c)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	jittered := make([]time.Duration, n)
	for i := 1; i < n; i++ {
		jittered[i] = max(jittered[i-1], steady[i]+time.Duration(rng.Int64N(int64(3*frame))))
	}
	skipped, dry := echoMoves.skipped.Load(), echoMoves.dry.Load()
	if again := echoOf(path, speech, jittered); !slices.Equal(again, heard) {
		t.Error("arrivals jittering by up to 60 ms changed the echo")
	}
	if s, d := echoMoves.skipped.Load()-skipped, echoMoves.dry.Load()-dry; s != 0 || d != 0 {
		t.Errorf("arrivals jittering by up to 60 ms were counted as moving the echo: %d frames skipped, %d sounds ran dry", s, d)
	}
}

// After a stall, the bot's audio comes in a bunch: the speaker skips
// what it cannot play in time, so that the echo falls no further behind
// than its delay and a little slack.
func TestEchoLineCatchesUp(t *testing.T) {
	path := echoPath{delay: 160 * time.Millisecond, gain: -10}
	const n = 100
	speech := speechtest.Noise(n*20, opusRate, 3)
	arrivals := make([]time.Duration, n)
	for i := range arrivals {
		arrivals[i] = time.Duration(i) * frame
		if i >= 10 && i < 20 {
			arrivals[i] = 20 * frame // 200 ms late, and then all at once
		}
	}
	skipped, dry := echoMoves.skipped.Load(), echoMoves.dry.Load()
	heard := echoOf(path, speech, arrivals)
	// The speaker ran dry 160 ms into the stall, started the rest anew
	// when it came, and skipped to get back within its slack.
	if s, d := echoMoves.skipped.Load()-skipped, echoMoves.dry.Load()-dry; s == 0 || d != 1 {
		t.Errorf("the stall was counted as %d frames skipped and %d sounds run dry; want some and 1", s, d)
	}
	end := len(heard)
	for end > 0 && heard[end-1] == 0 {
		end--
	}
	behind := time.Duration(end/frameSamples)*frame - arrivals[n-1] - frame
	t.Logf("the last frame's echo ended %v after it arrived", behind)
	if behind > path.delay+echoSlack+frame {
		t.Errorf("after the stall the echo fell %v behind; want at most %v", behind, path.delay+echoSlack)
	}
}

// A microphone woken late sends every frame captured since, and its
// speaker, on the sound card's clock, plays each at its time: stalls of
// the process of up to 200 ms leave the echo as it was, where a frame
// taken at each wake-up moved it by a frame a tick missed.
func TestLateMicrophoneKeepsTheEcho(t *testing.T) {
	path := echoPath{delay: 160 * time.Millisecond, gain: -10}
	const n = 150
	speech := speechtest.Noise(n*20, opusRate, 3)
	t0 := time.Unix(1000, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	echo := func(wakes func(tick int) time.Duration) []int16 {
		l := newEchoLine(path)
		c := newCaptureClock(t0)
		var heard []int16
		written := 0
		last := t0
		for tick := 1; tick <= n+int((path.delay+time.Second)/frame); tick++ {
			now := t0.Add(time.Duration(tick)*frame + wakes(tick))
			if !now.After(last) {
				continue // a tick missed in a stall is dropped, as a ticker does
			}
			last = now
			// The ear, as steady as in echoOf, wrote what came by now.
			for ; written < n && t0.Add(time.Duration(written)*frame+5*time.Millisecond).Before(now); written++ {
				at := t0.Add(time.Duration(written)*frame + 5*time.Millisecond)
				l.write(speech[written*frameSamples:(written+1)*frameSamples], at, uint32(written*frameSamples))
			}
			for _, slot := range c.due(now) {
				f := make([]int16, frameSamples)
				l.mix(f, slot)
				heard = append(heard, f...)
			}
		}
		return heard
	}
	onTime := echo(func(int) time.Duration { return 6 * time.Millisecond })
	skipped, dry := echoMoves.skipped.Load(), echoMoves.dry.Load()
	stalled := 0
	late := echo(func(tick int) time.Duration {
		if tick%15 == 0 { // a stall, after which the ticks come on time again
			stalled++
			return time.Duration(rng.Int64N(int64(10 * frame)))
		}
		return 6 * time.Millisecond
	})
	if s, d := echoMoves.skipped.Load()-skipped, echoMoves.dry.Load()-dry; s != 0 || d != 0 {
		t.Errorf("%d stalls of the microphone moved the echo: %d frames skipped, %d sounds ran dry", stalled, s, d)
	}
	if n := min(len(late), len(onTime)); !slices.Equal(trimmed(late[:n]), trimmed(onTime[:n])) {
		t.Errorf("%d stalls of the microphone changed the echo it heard", stalled)
	}
}

// A gap the bot leaves in sending, shorter than the speaker's delay, is
// played as silence: the echo of the sound after it comes as late as if
// the bot had sent the silence (its RTP timestamps jump over it), not
// squeezed up against the sound before.
func TestEchoLineKeepsGaps(t *testing.T) {
	path := echoPath{delay: 160 * time.Millisecond, gain: -10}
	const n, gapAt = 40, 20
	speech := speechtest.Noise(n*20, opusRate, 3)
	for _, gap := range []int{1, 3, 6} {
		sent := make([]int, n) // each frame's place on the RTP clock, in frames
		arrivals := make([]time.Duration, n)
		filled := slices.Clone(speech[:gapAt*frameSamples])
		filled = append(filled, make([]int16, gap*frameSamples)...)
		filled = append(filled, speech[gapAt*frameSamples:]...)
		steady := make([]time.Duration, n+gap)
		for i := range steady {
			steady[i] = time.Duration(i) * frame
		}
		for i := range sent {
			sent[i] = i
			if i >= gapAt {
				sent[i] += gap
			}
			arrivals[i] = time.Duration(sent[i]) * frame
		}
		// The ticks run on for as long after the last arrival in both.
		if !slices.Equal(trimmed(echoAt(path, speech, sent, arrivals)), trimmed(echoOf(path, filled, steady))) {
			t.Errorf("a gap of %d frames in sending did not come back as silence in the echo", gap)
		}
	}
}

// trimmed is a without its trailing silence.
func trimmed(a []int16) []int16 {
	for len(a) > 0 && a[len(a)-1] == 0 {
		a = a[:len(a)-1]
	}
	return a
}

// echoOf is what a silent microphone hears when the ear receives the
// frames of speech at arrivals (since the first), one tick at a time, 5
// ms after the ear's frames would come at a steady pace.
func echoOf(path echoPath, speech []int16, arrivals []time.Duration) []int16 {
	sent := make([]int, len(arrivals))
	for i := range sent {
		sent[i] = i
	}
	return echoAt(path, speech, sent, arrivals)
}

// echoAt is echoOf for frames sent on the RTP clock at sent, in frames.
func echoAt(path echoPath, speech []int16, sent []int, arrivals []time.Duration) []int16 {
	l := newEchoLine(path)
	t0 := time.Unix(1000, 0)
	var heard []int16
	next := 0
	// Long enough for a speaker a second behind to finish.
	for tick := range len(arrivals) + int((path.delay+time.Second)/frame) {
		now := time.Duration(tick)*frame + 5*time.Millisecond
		for ; next < len(arrivals) && arrivals[next] <= now; next++ {
			l.write(speech[next*frameSamples:(next+1)*frameSamples], t0.Add(arrivals[next]), uint32(sent[next]*frameSamples))
		}
		f := make([]int16, frameSamples)
		l.mix(f, t0.Add(now))
		heard = append(heard, f...)
	}
	return heard
}
func correlation(a, b []int16) float64 {
	var ab, aa, bb float64
	for i := range min(len(a), len(b)) {
		x, y := float64(a[i]), float64(b[i])
		ab, aa, bb = ab+x*y, aa+x*x, bb+y*y
	}
	return ab / math.Sqrt(aa*bb)
}
