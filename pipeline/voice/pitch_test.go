package voice_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

// sound is a test sound, made once a test asks for it.
type sound struct {
	name string
	make func(t testing.TB) []int16
}

// noises are sounds over the agent that are not speech and last at most
// 400 ms: white and pink noise from quiet to loud, a door's thud, a
// cough, clicks and knocks, and a knock whose ring runs into noise.
func noises() []sound {
	var out []sound
	for _, colour := range []string{"whitenoise", "pinknoise"} {
		for _, ms := range []int{100, 200, 300, 400} {
			for _, db := range []float64{-20, -12, -6} {
				out = append(out, sound{fmt.Sprintf("%s %d ms %g dBFS", colour, ms, db), func(t testing.TB) []int16 {
					return speechtest.SoxNoise(t, colour, ms, rate, db)
				}})
			}
		}
	}
	return append(out,
		sound{"burst 300 ms -20 dBFS", func(testing.TB) []int16 { return speechtest.Burst(300, rate, -20, 7) }},
		sound{"click 300 ms", func(testing.TB) []int16 { return speechtest.Click(300, rate) }},
		sound{"thud 400 ms", func(t testing.TB) []int16 {
			return speechtest.SoxNoise(t, "brownnoise", 400, rate, -10, "fade", "l", "0", "0.4", "0.35")
		}},
		sound{"cough 300 ms", func(t testing.TB) []int16 { return speechtest.Cough(t, 300, rate, -12) }},
		sound{"cough 400 ms loud", func(t testing.TB) []int16 { return speechtest.Cough(t, 400, rate, -6) }},
		sound{"knocks", func(t testing.TB) []int16 { return speechtest.Knocks(t, 3, rate, -10) }},
		sound{"a knock into a burst of noise", func(t testing.TB) []int16 {
			ring := speechtest.Knocks(t, 1, rate, -10)[:40*rate/1000]
			return append(ring, speechtest.Burst(300, rate, -20, 7)...)
		}},
	)
}

// stopPhrase is the question said over the agent in the tests of
// barge-in: its first word begins without pitch.
const stopPhrase = "Stop, tell me about Paris instead."

// spoken are words said over the agent, many beginning with a consonant
// without pitch ("stop", "so", "tell me", "what", "how far"), and
// backchannels.
func spoken() []sound {
	var out []sound
	for _, text := range []string{"stop", "so", "tell me", "what", "how far is the moon", "Paris", "yes", "no", "okay", "right", "sorry", "wait"} {
		out = append(out, sound{text, func(t testing.TB) []int16 { return speechtest.Trim(speechtest.Render(t, text, 140, rate)) }})
	}
	return append(out,
		sound{"stop, a low voice", func(t testing.TB) []int16 {
			return speechtest.Trim(speechtest.RenderWith(t, "stop", rate, "-s", "140", "-p", "0"))
		}},
		sound{"stop…, said fast", func(t testing.TB) []int16 {
			return speechtest.Trim(speechtest.Render(t, stopPhrase, 175, rate))
		}},
		sound{"so, a woman's high voice", func(t testing.TB) []int16 {
			return speechtest.Trim(speechtest.RenderWith(t, "so", rate, "-s", "140", "-p", "99", "-v", "en+f3"))
		}},
		sound{"mm-hm", func(t testing.TB) []int16 { return speechtest.Trim(speechtest.MmHm(t, rate)) }},
		sound{"uh-huh", func(t testing.TB) []int16 { return speechtest.Trim(speechtest.UhHuh(t, rate)) }},
		sound{"hum", func(testing.TB) []int16 { return speechtest.Hum(300, rate) }},
	)
}

// onsetOf is what the endpointer made of a sound in a room: when, from
// the sound's first sample, the utterance started and was confirmed as
// speech (-1: never).
type onsetOf struct{ started, confirmed time.Duration }

func hear(t *testing.T, s []int16, noise float64) onsetOf {
	t.Helper()
	lead := speechtest.Silence(600, rate)
	pcm := mix(append(append(lead, s...), speechtest.Silence(1000, rate)...), noise)
	h := onsetOf{-1, -1}
	for _, ev := range run(t, endpointer(t, voice.EndpointConfig{}), pcm, nil) {
		at := ev.at - time.Duration(len(lead))*time.Second/rate
		switch ev.kind {
		case voice.SpeechStarted:
			h.started = at
		case voice.SpeechConfirmed:
			if h.started < 0 {
				t.Fatalf("confirmed before it started")
			}
			h.confirmed = at
		}
	}
	return h
}

// The endpointer tells speech from noise by its pitch: no noise of up to
// 400 ms is confirmed as speech, even the loud ones the VAD calls voice,
// in a quiet room or after the digital silence of a client in DTX,
// while every word is, within 300 ms of its first sound, also when it
// begins without pitch, in a quiet room and over a noisy one (where the
// VAD misses some quiet words altogether, which is no concern of the
// pitch's).
func TestEndpointerTellsSpeechFromNoise(t *testing.T) {
	started := 0
	for _, n := range noises() {
		for _, room := range []float64{1, 0} {
			h := hear(t, n.make(t), room)
			t.Logf("%-28s room %g: started %v, confirmed %v", n.name, room, h.started, h.confirmed)
			if h.started >= 0 {
				started++
			}
			if h.confirmed >= 0 {
				t.Errorf("%s, room %g: confirmed as speech %v after its first sound", n.name, room, h.confirmed)
			}
		}
	}
	if started == 0 {
		t.Fatalf("the VAD took no noise for voice: the test shows nothing")
	}
	for _, room := range []struct {
		name  string
		noise float64
	}{{"quiet", 1}, {"noisy", 8}} {
		for _, s := range spoken() {
			h := hear(t, s.make(t), room.noise)
			t.Logf("%s room: %-20s started %v, confirmed %v", room.name, s.name, h.started, h.confirmed)
			if h.started < 0 && room.noise > 1 {
				continue
			}
			if h.started < 0 || h.confirmed < 0 || h.confirmed > 300*time.Millisecond {
				t.Errorf("%s room: %q started %v, confirmed %v after its first sound", room.name, s.name, h.started, h.confirmed)
			}
		}
	}
}

// A "stop" starts an utterance from its "s", through the closure and the
// burst of its "t", which the VAD calls silence, and is confirmed as
// speech at its vowel's first periods, also said fast, and as a client's
// Opus brings it, wherever its onset falls in a frame. The utterance's
// onset is its first sound: the barge-in is timed from there. Its
// vowel's pitch glides fast; measured over the 23 ms from a window's
// start, it was confirmed at 220 ms. With windows every 10 ms, the
// Opus-coded "stop" was confirmed up to 212 ms after its first sound,
// depending on where in a frame it began.
func TestEndpointerHearsAStopFromItsHiss(t *testing.T) {
	for _, c := range []struct {
		wpm   int
		coded bool
	}{{140, false}, {175, false}, {140, true}, {175, true}} {
		stop := speechtest.Trim(speechtest.Render(t, stopPhrase, c.wpm, rate))
		if c.coded {
			stop = speechtest.Coded(t, stop, rate)
		}
		for shift := time.Duration(0); shift < voice.FrameDuration; shift += 2 * time.Millisecond {
			at := fmt.Sprintf("%d words a minute (Opus: %v), %v into a frame", c.wpm, c.coded, shift)
			lead := 600*time.Millisecond + shift
			pcm := mix(append(append(speechtest.Silence(int(lead/time.Millisecond), rate), stop...), speechtest.Silence(1000, rate)...), 1)
			var started, onset, confirmed time.Duration = -1, -1, -1
			for _, s := range run(t, endpointer(t, voice.EndpointConfig{}), pcm, nil) {
				switch {
				case s.kind == voice.SpeechStarted && started < 0:
					started, onset = s.at-lead, s.at-s.ev.Onset-lead
				case s.kind == voice.SpeechConfirmed && confirmed < 0:
					confirmed = s.at - lead
				}
			}
			t.Logf("%s: started %v, its onset at %v, confirmed %v after the first sound", at, started, onset, confirmed)
			// MinSpeech of voice, the "t"'s 40 ms and a frame of
			// alignment; Opus delays the sound by 6.5 ms and may soften
			// the hiss's first frame to less than voice.
			late := voice.FrameDuration
			if c.coded {
				late *= 2
			}
			if started < 0 || started > 180*time.Millisecond || onset < -voice.FrameDuration || onset > late {
				t.Errorf("%s: started %v after the first sound, its onset placed at %v", at, started, onset)
			}
			if confirmed < 0 || confirmed > 200*time.Millisecond {
				t.Errorf("%s: confirmed as speech %v after the first sound", at, confirmed)
			}
		}
	}
}

// A sound without pitch that goes on, a whisper, is confirmed as speech
// once it has lasted UnpitchedSpeech, so that a whispered "stop talking"
// still pauses the agent; a long noise is, too.
func TestEndpointerConfirmsAWhisper(t *testing.T) {
	for _, s := range []sound{
		{"whisper", func(t testing.TB) []int16 {
			return speechtest.Trim(speechtest.RenderWith(t, "please stop talking now", rate, "-s", "140", "-v", "en+whisper"))
		}},
		{"noise 900 ms", func(t testing.TB) []int16 { return speechtest.SoxNoise(t, "whitenoise", 900, rate, -12) }},
	} {
		h := hear(t, s.make(t), 1)
		t.Logf("%s: started %v, confirmed %v", s.name, h.started, h.confirmed)
		if h.started < 0 || h.confirmed < 0 {
			t.Fatalf("%s: started %v, confirmed %v", s.name, h.started, h.confirmed)
		}
		// Confirmed by its length, not by a pitch: after 500 ms of voice.
		if h.confirmed < 500*time.Millisecond {
			t.Errorf("%s: confirmed %v after its first sound; its voice has no pitch", s.name, h.confirmed)
		}
	}
}

// frames cuts pcm into the endpointer's frames.
func frames(pcm []int16) [][]int16 {
	var f voice.Framer
	return f.Write(pcm)
}

// Frame by frame, voice has pitch and noise has none: no frame of noise
// (of those loud enough to be heard) reaches MinPeriodicity, while every
// word has frames that do in a row, as the endpointer needs.
func TestPeriodicity(t *testing.T) {
	// judge scores the frames of pcm: their share at or over
	// MinPeriodicity, the longest run of those, and the highest score.
	judge := func(pcm []int16) (share float64, run int, most float64) {
		fs := frames(append(speechtest.Silence(20, rate), pcm...))
		n, loud, cur := 0, 0, 0
		for i := 1; i < len(fs); i++ {
			if speechtest.RMS(fs[i]) < 300 {
				continue
			}
			loud++
			p := voice.Periodicity(fs[i-1], fs[i])
			most = max(most, p)
			if p < voice.MinPeriodicity {
				cur = 0
				continue
			}
			n, cur = n+1, cur+1
			run = max(run, cur)
		}
		return float64(n) / float64(max(1, loud)), run, most
	}
	for _, n := range noises() {
		share, _, most := judge(n.make(t))
		t.Logf("%-28s %3.0f%% of frames with pitch, at most %.2f", n.name, 100*share, most)
		if share > 0 {
			t.Errorf("%s: %.0f%% of its frames have pitch", n.name, 100*share)
		}
	}
	for _, s := range spoken() {
		share, run, most := judge(s.make(t))
		t.Logf("%-28s %3.0f%% of frames with pitch, %d in a row, at most %.2f", s.name, 100*share, run, most)
		if run < 2 {
			t.Errorf("%s: at most %d frame with pitch in a row", s.name, run)
		}
	}
}
