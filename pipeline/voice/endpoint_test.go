package voice_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

const rate = voice.InputRate

// mix adds noise under the whole signal, as a room would.
func mix(signal []int16, noiseGain float64) []int16 {
	noise := speechtest.Noise(len(signal)*1000/rate+1, rate, 7)
	out := make([]int16, len(signal))
	for i := range signal {
		v := int(signal[i]) + int(float64(noise[i])*noiseGain)
		out[i] = int16(max(-32768, min(32767, v)))
	}
	return out
}

func (s seen) String() string { return fmt.Sprintf("%d@%v", s.kind, s.at) }

// voiceEnd is where rendered speech really stops: espeak-ng pads its
// output with silence.
func voiceEnd(pcm []int16) int {
	for i := len(pcm) - 1; i >= 0; i-- {
		if pcm[i] > 500 || pcm[i] < -500 {
			return i + 1
		}
	}
	return 0
}

type seen struct {
	kind voice.EndpointEventKind
	at   time.Duration // audio time of the frame that completed the event
	ev   voice.EndpointEvent
}

func run(t *testing.T, e *voice.Endpointer, pcm []int16, text func(time.Duration) string) []seen {
	t.Helper()
	var f voice.Framer
	var out []seen
	n := 0
	for _, fr := range f.Write(pcm) {
		n++
		at := time.Duration(n) * voice.FrameDuration
		if text != nil && e.InSpeech() {
			e.SetText(text(at))
		}
		evs, err := e.Push(fr)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			out = append(out, seen{ev.Kind, at, ev})
		}
	}
	return out
}

// utterances are the starts and ends of utterances among events,
// without their confirmations as speech.
func utterances(events []seen) []seen {
	var out []seen
	for _, e := range events {
		if e.kind != voice.SpeechConfirmed {
			out = append(out, e)
		}
	}
	return out
}

func endpointer(t *testing.T, cfg voice.EndpointConfig) *voice.Endpointer {
	e, err := voice.NewEndpointer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEndpointerFindsOneUtterance(t *testing.T) {
	speech := speechtest.Render(t, "What is the weather like in Paris today?", 140, rate)
	lead := speechtest.Silence(1000, rate)
	pcm := mix(append(append(lead, speech...), speechtest.Silence(2000, rate)...), 1)
	got := utterances(run(t, endpointer(t, voice.EndpointConfig{}), pcm, nil))
	if len(got) != 2 || got[0].kind != voice.SpeechStarted || got[1].kind != voice.SpeechEnded {
		t.Fatalf("events %+v", got)
	}
	speechEnd := time.Duration(len(lead)+voiceEnd(speech)) * time.Second / rate
	start := got[0].at - time.Second
	delay := got[1].at - speechEnd
	t.Logf("start %v after the voice began, end of utterance %v after it stopped, %v of voice, utterance %v",
		start, delay, got[1].ev.Speech, time.Duration(len(got[1].ev.Audio))*time.Second/rate)
	if start > 300*time.Millisecond || delay < 500*time.Millisecond || delay > 900*time.Millisecond {
		t.Fatalf("start %v, end delay %v", start, delay)
	}
	// The utterance holds the whole question, from before its first
	// consonant.
	if n := len(got[1].ev.Audio); n < len(speech) {
		t.Fatalf("utterance of %d samples is shorter than the speech (%d)", n, len(speech))
	}
}

// A one-word answer is an utterance like any other.
func TestEndpointerKeepsShortUtterances(t *testing.T) {
	speech := speechtest.Render(t, "Yes.", 140, rate)
	pcm := mix(append(append(speechtest.Silence(500, rate), speech...), speechtest.Silence(1000, rate)...), 1)
	got := utterances(run(t, endpointer(t, voice.EndpointConfig{}), pcm, nil))
	if len(got) != 2 || got[1].kind != voice.SpeechEnded {
		t.Fatalf("events %+v", got)
	}
	t.Logf("%q lasted %v of voice", "Yes.", got[1].ev.Speech)
}

// Clicks shorter than MinSpeech start nothing, and a room getting louder
// raises the noise floor instead of starting speech; speech over that
// noise is still found.
func TestEndpointerIgnoresClicksAndNoise(t *testing.T) {
	pcm := mix(speechtest.Silence(500, rate), 1)
	pcm = append(pcm, speechtest.Click(60, rate)...)
	pcm = append(pcm, mix(speechtest.Silence(1000, rate), 1)...)
	e := endpointer(t, voice.EndpointConfig{})
	if got := run(t, e, pcm, nil); len(got) != 0 {
		t.Fatalf("a 60 ms click gave %v", got)
	}
	quiet := e.NoiseFloor()
	// A fan starting: the noise rises 26 dB over two seconds.
	ramp := speechtest.Noise(2000, rate, 3)
	for i := range ramp {
		ramp[i] = int16(float64(ramp[i]) * math.Pow(10, 26*float64(i)/float64(len(ramp))/20))
	}
	loud := append(ramp, mix(speechtest.Silence(2000, rate), 20)...)
	if got := run(t, e, loud, nil); len(got) != 0 {
		t.Fatalf("rising noise gave %v", got)
	}
	if e.NoiseFloor() < quiet+20 {
		t.Fatalf("noise floor went from %.1f to %.1f dBFS only", quiet, e.NoiseFloor())
	}
	t.Logf("noise floor %.1f → %.1f dBFS", quiet, e.NoiseFloor())
	speech := mix(append(speechtest.Render(t, "How far is the moon?", 140, rate), speechtest.Silence(1000, rate)...), 20)
	if got := utterances(run(t, e, speech, nil)); len(got) != 2 {
		t.Fatalf("speech over noise gave %v", got)
	}
}

// A pause after words that cannot end a sentence is waited out; the same
// pause after a finished sentence ends the utterance.
func TestEndpointerWaitsLongerWhenUnfinished(t *testing.T) {
	first := speechtest.Trim(speechtest.Render(t, "What is the weather like in", 140, rate))
	second := speechtest.Trim(speechtest.Render(t, "Paris today?", 140, rate))
	pcm := append(speechtest.Silence(300, rate), first...)
	pcm = append(pcm, speechtest.Silence(1000, rate)...)
	pcm = append(pcm, second...)
	pcm = append(pcm, speechtest.Silence(2000, rate)...)
	pcm = mix(pcm, 1)
	pause := time.Duration(300*rate/1000+len(first)) * time.Second / rate
	unfinished := func(at time.Duration) string {
		if at < pause+time.Second {
			return "what is the weather like in"
		}
		return "what is the weather like in paris today"
	}
	got := utterances(run(t, endpointer(t, voice.EndpointConfig{}), pcm, unfinished))
	if len(got) != 2 {
		t.Fatalf("unfinished words: %+v", got)
	}
	finished := func(time.Duration) string { return "what is the weather like" + "." }
	if got := utterances(run(t, endpointer(t, voice.EndpointConfig{}), pcm, finished)); len(got) != 4 {
		t.Fatalf("finished words: %d events", len(got))
	}
}

func TestLooksUnfinished(t *testing.T) {
	for text, want := range map[string]bool{
		"": false, "what is the weather like in": true, "I went there and": true, "Hello,": true,
		"how far is the moon": false, "is it the": true, "it is done.": false,
	} {
		if voice.LooksUnfinished(text) != want {
			t.Errorf("%q: want %v", text, want)
		}
	}
}

// Sound the endpointer forgot (the agent's echo, which the suppressor
// followed to a new delay only after it had counted towards a start)
// starts no utterance: voice must then last MinSpeech anew. An utterance
// already under way is not forgotten.
func TestEndpointerForgetsTheRunSoFar(t *testing.T) {
	pcm := mix(append(speechtest.Render(t, "How far is the moon?", 140, rate), speechtest.Silence(1000, rate)...), 20)
	cfg := voice.EndpointConfig{MinSpeech: 120 * time.Millisecond}
	minSpeech := int(cfg.MinSpeech / voice.FrameDuration)
	var f voice.Framer
	frames := f.Write(pcm)
	startsAt := func(forgetAt int) int {
		e := endpointer(t, cfg)
		for i, fr := range frames {
			if i == forgetAt {
				e.Forget()
			}
			evs, err := e.Push(fr)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Kind == voice.SpeechStarted {
					return i
				}
			}
		}
		return -1
	}
	start := startsAt(-1)
	if start < 0 {
		t.Fatal("the speech never started")
	}
	if got := startsAt(start); got < start+minSpeech {
		t.Errorf("forgotten one frame before it started, the speech started %d frames later; want %d or more", got-start, minSpeech)
	}

	e := endpointer(t, cfg)
	ended := false
	for i, fr := range frames {
		if i == start+5 {
			e.Forget()
			if !e.InSpeech() {
				t.Fatal("the utterance under way was forgotten")
			}
		}
		evs, err := e.Push(fr)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			ended = ended || ev.Kind == voice.SpeechEnded
		}
	}
	if !ended {
		t.Error("the utterance under way never ended")
	}
}
