package echo

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
)

// answer is the agent's voice in these tests: about ten seconds of
// espeak-ng at the track's usual rate, the synthesiser's 24 kHz.
const answer = "The weather in Paris is mild today, with a light breeze from the west. " +
	"Clouds will gather in the afternoon, and there may be a short shower around five. " +
	"Tomorrow will be sunny and warmer, a good day for a walk along the river."

const trackRate = 24000

// call replays the agent's voice and the microphone through a
// suppressor, and returns what came out and what each hop decided.
type call struct {
	s        *Suppressor
	out      []int16
	rejected int
	// lockedAt is the microphone's sample when a delay was first locked;
	// -1 if never.
	lockedAt int
}

func replay(t testing.TB, agent, mic []int16) *call {
	t.Helper()
	ref := &Reference{}
	c := &call{s: NewSuppressor(ref, Config{}), lockedAt: -1}
	speechtest.Replay(agent, trackRate, mic, time.Unix(1000, 0), ref.Write, func(chunk []int16, at time.Time) {
		pcm := append([]int16(nil), chunk...)
		if c.s.Process(pcm, at) {
			c.rejected++
		}
		if c.lockedAt < 0 && c.s.mode == locked {
			c.lockedAt = len(c.out)
		}
		c.out = append(c.out, pcm...)
	})
	return c
}

// energy is the sum of squares of pcm[from:to], clipped to its length.
func energy(pcm []int16, from, to int) float64 {
	var s float64
	for _, v := range pcm[min(max(0, from), len(pcm)):min(max(to, 0), len(pcm))] {
		s += float64(v) * float64(v)
	}
	return s
}

// Audio goes through exactly as it came while the agent has not talked,
// and again once it stopped (a question after an answer is not held
// back); while it talks over a silent microphone, silence comes out.
func TestPassThroughIsExact(t *testing.T) {
	question := speechtest.Render(t, "How far is the moon?", 140, Rate)
	agent := speechtest.Render(t, answer, 140, trackRate)
	after := len(agent)*Rate/trackRate + 2*Rate
	for _, tc := range []struct {
		name  string
		agent []int16
		at    int
	}{
		{"no agent", nil, 0},
		{"after the agent", agent, after},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := speechtest.Mix(nil, question, tc.at, 0)
			c := replay(t, tc.agent, in)
			if len(c.out) < tc.at+len(question)/2 {
				t.Fatalf("%d samples came out of %d", len(c.out), len(in))
			}
			for i := range tc.at {
				if c.out[i] != 0 {
					t.Fatalf("sample %d of a silent microphone came out as %d", i, c.out[i])
				}
			}
			for i := tc.at; i < len(c.out); i++ {
				if c.out[i] != in[i] {
					t.Fatalf("sample %d is %d; went in as %d", i, c.out[i], in[i])
				}
			}
			if c.s.w != nil {
				t.Fatal("the analysis is held for a microphone with no echo, the agent silent")
			}
		})
	}
}

var paths = []speechtest.EchoPath{
	{Delay: 100 * time.Millisecond, GainDB: -10},
	{Delay: 100 * time.Millisecond, GainDB: -3},
	{Delay: 300 * time.Millisecond, GainDB: -10},
	{Delay: 300 * time.Millisecond, GainDB: -3},
}

func pathName(p speechtest.EchoPath) string {
	return fmt.Sprintf("%v %+.0fdB", p.Delay, p.GainDB)
}

// The echo's delay is found within the first second of it, and the echo
// is removed: its suppression over the whole answer, first words
// included, is the echo return loss enhancement (ERLE) logged, over the
// stretches that hold it.
func TestEchoFoundAndRemoved(t *testing.T) {
	agent := speechtest.Render(t, answer, 140, trackRate)
	for _, p := range paths {
		t.Run(pathName(p), func(t *testing.T) {
			mic := p.Of(t, agent, trackRate)
			c := replay(t, agent, mic)
			if c.lockedAt < 0 {
				t.Fatal("no delay was found")
			}
			start := int(p.Delay * Rate / time.Second)
			lag := c.s.w.est.delay * hopDuration
			// Over the stretches of 100 ms that hold the echo (over -50
			// dBFS): what is left in the quiet between them is the codecs'
			// noise, passed as it came.
			var in, out float64
			for i := 0; i+Rate/10 <= len(c.out); i += Rate / 10 {
				if e := energy(mic, i, i+Rate/10); e > Rate/10*math.Pow(32768*math.Pow(10, -50.0/20), 2) {
					in, out = in+e, out+energy(c.out, i, i+Rate/10)
				}
			}
			erle := 10 * math.Log10(in/out)
			after := float64(c.lockedAt-start) / Rate
			t.Logf("delay %d ms found %.2f s into the echo; ERLE %.1f dB; %d stretches of echo rejected", lag, after, erle, c.rejected)
			if d := time.Duration(lag)*time.Millisecond - p.Delay; d < -20*time.Millisecond || d > 30*time.Millisecond {
				t.Errorf("delay %d ms; the echo's is %v", lag, p.Delay)
			}
			if after > 1.5 {
				t.Errorf("the delay was found %.2f s into the echo", after)
			}
			if erle < 25 {
				t.Errorf("ERLE %.1f dB", erle)
			}
			if c.rejected == 0 {
				t.Error("no echo counted as rejected")
			}
			// What a log line about speech let through says of the path.
			logged := map[string]slog.Value{}
			for _, a := range c.s.LogValue().Group() {
				logged[a.Key] = a.Value
			}
			if logged["path"].String() != "locked" || logged["delay"].Duration() != time.Duration(lag)*time.Millisecond {
				t.Errorf("the suppressor logs itself as %v, with the path locked at %d ms", logged, lag)
			}
			if st := c.s.Path(); st != (PathState{"locked", time.Duration(lag) * time.Millisecond}) {
				t.Errorf("the path is %+v, locked at %d ms", st, lag)
			}
		})
	}
}

// The reference keeps the agent's audio only while a microphone may need
// it: from a suppressor's start until it knows its microphone carries no
// echo and the agent has stopped, or it closes.
func TestReferenceKeepsAudioOnlyWhileWanted(t *testing.T) {
	ref := &Reference{}
	frame := make([]int16, trackRate/50)
	t0 := time.Unix(1000, 0)
	ref.Write(frame, trackRate, t0)
	if ref.ring != nil {
		t.Fatal("the audio was kept with no microphone to want it")
	}
	s := NewSuppressor(ref, Config{})
	ref.Write(frame, trackRate, t0.Add(20*time.Millisecond))
	if ref.ring == nil {
		t.Fatal("the audio was not kept for a microphone that may echo")
	}
	s.mode = none
	mic := make([]int16, Rate/50)
	s.Process(mic, t0.Add(2*time.Second)) // the agent silent long since
	ref.Write(frame, trackRate, t0.Add(2*time.Second))
	if ref.ring != nil || s.w != nil {
		t.Fatal("a microphone with no echo kept the audio and its analysis while the agent was silent")
	}
	s.keep(true)
	s.Close()
	ref.Write(frame, trackRate, t0.Add(3*time.Second))
	if ref.ring != nil {
		t.Fatal("the audio was kept after its microphone closed")
	}
}

// What the reference gives back is what was sent where it was placed,
// silence in its gaps and before it began, and nothing older than the
// second it keeps, wherever a read or a write falls on its ring.
func TestReferenceReadsWhatWasSent(t *testing.T) {
	ref := &Reference{}
	s := NewSuppressor(ref, Config{}) // a microphone that may echo: the audio is kept
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	n := trackRate / 50
	sent := map[int64]int16{}
	at := time.Unix(1000, 0)
	for range 400 {
		frame := make([]int16, n)
		for i := range frame {
			frame[i] = int16(rng.IntN(65535) - 32767)
		}
		// Mostly back to back with a sender's jitter; now and then a
		// pause, some longer than what is kept.
		switch r := rng.IntN(20); {
		case r == 0:
			at = at.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		default:
			at = at.Add(20*time.Millisecond + time.Duration(rng.IntN(9)-4)*time.Millisecond)
		}
		ref.Write(frame, trackRate, at)
		for i, v := range frame {
			sent[ref.end-int64(n)+int64(i)] = v
		}
		size := int64(len(ref.ring))
		for range 3 {
			from := ref.end - int64(rng.IntN(int(size)+3*n)) - int64(n)
			dst := make([]float32, rng.IntN(3*n)+1)
			energy, ok := ref.read(dst, from, ref.gen)
			if !ok {
				t.Fatal("the reference started over at the same rate")
			}
			var want float64
			for i, got := range dst {
				p := from + int64(i)
				v := sent[p]
				if p >= ref.end || p < ref.end-size {
					v = 0
				}
				if got != float32(v) {
					t.Fatalf("sample %d read as %v, sent as %d (kept from %d to %d)", p, got, v, ref.end-size, ref.end)
				}
				want += float64(v) * float64(v)
			}
			if energy != want {
				t.Fatalf("the energy read was %v, want %v", energy, want)
			}
		}
	}
}

// A client's jitter buffer shrinks in the silence between two answers,
// so that the second answer's echo comes 20 ms sooner than the first
// one's did: it is removed from its first syllable, not only once the
// delay moved.
func TestEchoSoonerAfterAPause(t *testing.T) {
	first := speechtest.Render(t, "The weather in Paris is mild today.", 140, trackRate)
	second := speechtest.Render(t, "Tomorrow will be sunny and warmer.", 140, trackRate)
	gap := 2 * trackRate
	agent := append(append(append([]int16(nil), first...), make([]int16, gap)...), second...)
	was := speechtest.EchoPath{Delay: 140 * time.Millisecond, GainDB: -10}
	now := speechtest.EchoPath{Delay: 120 * time.Millisecond, GainDB: -10}
	at := (len(first) + gap) * Rate / trackRate
	mic := speechtest.Mix(was.Of(t, first, trackRate), now.Of(t, second, trackRate), at, 0)
	c := replay(t, agent, mic)
	if c.lockedAt < 0 || c.lockedAt > at {
		t.Fatalf("no delay was found over the first answer (locked at sample %d)", c.lockedAt)
	}
	// The second echo's first half second, a hop late as it comes out.
	from := at + int(now.Delay*Rate/time.Second)
	to, late := from+Rate/2, Rate/100
	erle := 10 * math.Log10(energy(mic, from, to)/max(1, energy(c.out, from+late, to+late)))
	t.Logf("the second echo's first 500 ms: ERLE %.1f dB", erle)
	if erle < 25 {
		t.Errorf("the second echo's first 500 ms came through: ERLE %.1f dB", erle)
	}
}

// Echo taken out of a microphone that is digitally silent but for it
// leaves a faint noise, never digital silence: a recogniser may take
// zeros inside an utterance for its end, as pocketsphinx took those
// between a user's "Stop," and "tell me" when the echo between them was
// taken out.
func TestEchoLeavesNoDigitalSilence(t *testing.T) {
	agent := speechtest.Render(t, answer, 140, trackRate)
	p := speechtest.EchoPath{Delay: 100 * time.Millisecond, GainDB: -10}
	mic := p.Of(t, agent, trackRate)
	c := replay(t, agent, mic)
	if c.lockedAt < 0 {
		t.Fatal("no delay was found")
	}
	hop := Rate / 100
	zeros, echoed := 0, 0
	for i := c.lockedAt + hop; i+2*hop <= len(c.out); i += hop {
		if energy(mic, i-hop, i) < float64(hop)*100*100 {
			continue // not an echo's hop (under -50 dBFS), as it came in
		}
		echoed++
		if energy(c.out, i, i+hop) == 0 {
			zeros++
		}
	}
	if echoed == 0 || zeros > 0 {
		t.Errorf("%d of %d hops of echo came out as digital silence", zeros, echoed)
	}
}

// Echoing says whether what comes out may still hold the agent's echo:
// through an answer whose echo the microphone carries, and not once the
// agent has been silent for two seconds, nor over a microphone found to carry
// none (a headset, whose user the stage then confirms by the quicker
// pitch measure).
func TestEchoingOnlyWhereAnEchoMayBe(t *testing.T) {
	agent := speechtest.Render(t, answer, 140, trackRate)
	answerEnd := len(agent) * Rate / trackRate
	echo := speechtest.EchoPath{Delay: 100 * time.Millisecond, GainDB: -10}.Of(t, agent, trackRate)
	for _, mic := range []struct {
		name  string
		pcm   []int16
		echoy bool
	}{
		{"speakerphone", append(echo, make([]int16, 3*Rate)...), true},
		{"headset", speechtest.Noise(answerEnd*1000/Rate+3000, Rate, 5), false},
	} {
		ref := &Reference{}
		s := NewSuppressor(ref, Config{})
		heard, during, after := 0, 0, 0
		speechtest.Replay(agent, trackRate, mic.pcm, time.Unix(1000, 0), ref.Write, func(chunk []int16, at time.Time) {
			s.Process(append([]int16(nil), chunk...), at)
			heard += len(chunk)
			switch {
			case heard > 3*Rate && heard < answerEnd && s.Echoing():
				during++
			case heard > answerEnd+2*Rate && s.Echoing():
				after++
			}
		})
		t.Logf("%s: echoing in %d chunks from 3 s into the answer to its end, %d two seconds after it", mic.name, during, after)
		if after > 0 || (during > 0) != mic.echoy {
			t.Errorf("%s: echoing in %d chunks of the answer and %d after it", mic.name, during, after)
		}
	}
}

// The agent's voice at a rate whose 20 ms window is an odd number of
// samples (22.05 kHz) is not kept: the microphone, its echo and all,
// goes through as it came.
func TestReferenceAtAnOddRateIsNotKept(t *testing.T) {
	const odd = 22050
	agent := speechtest.Render(t, answer, 140, odd)
	// The echo, 100 ms late and 3 dB down.
	voiced := speechtest.Render(t, answer, 140, Rate)
	mic := speechtest.Mix(make([]int16, len(voiced)+Rate/10), voiced, Rate/10, -3)
	ref := &Reference{}
	s := NewSuppressor(ref, Config{})
	defer s.Close()
	var in, out []int16
	speechtest.Replay(agent, odd, mic, time.Unix(1000, 0), ref.Write, func(chunk []int16, at time.Time) {
		in = append(in, chunk...)
		pcm := append([]int16(nil), chunk...)
		s.Process(pcm, at)
		out = append(out, pcm...)
	})
	if !slices.Equal(in, out) {
		t.Fatal("the microphone did not go through as it came")
	}
	if s.Echoing() {
		t.Fatal("the microphone is taken to carry an echo of a voice not kept")
	}
}

// A bin's power kept in 16 bits comes back within 0.4%, and the codes
// keep the powers' order, which predict's loudest-of-the-taps relies on.
func TestBinPowerKeepsLevelAndOrder(t *testing.T) {
	last := toBinPower(0)
	if last.float() != 0 {
		t.Fatalf("0 came back as %g", last.float())
	}
	for v := 1e-6; v < 1e13; v *= 1.0007 {
		p := toBinPower(v)
		if got := p.float(); math.Abs(got-v) > 0.004*v {
			t.Fatalf("%g came back as %g", v, got)
		}
		if p < last {
			t.Fatalf("%g coded %d, under the smaller power's %d", v, p, last)
		}
		last = p
	}
}
