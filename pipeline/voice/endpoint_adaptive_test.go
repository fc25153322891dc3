package voice_test

import (
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

// spokenWith is words said one after another with the pauses between
// them, then a long silence.
func spokenWith(t *testing.T, words []string, pause func(i int) time.Duration) []int16 {
	var pcm []int16
	pcm = append(pcm, speechtest.Silence(300, rate)...)
	for i, w := range words {
		if i > 0 {
			pcm = append(pcm, speechtest.Silence(int(pause(i).Milliseconds()), rate)...)
		}
		pcm = append(pcm, speechtest.Trim(speechtest.Render(t, w, 160, rate))...)
	}
	return append(pcm, speechtest.Silence(2500, rate)...)
}

func ends(s []seen) []seen {
	var out []seen
	for _, e := range s {
		if e.kind == voice.SpeechEnded {
			out = append(out, e)
		}
	}
	return out
}

var slowWords = []string{"well", "I", "think", "that", "maybe", "tomorrow", "we", "could", "go", "walking", "somewhere", "quiet"}

// A slow speaker's long pauses end utterances at the fixed silence; the
// adaptive endpointer learns them from the utterances it cut short and
// stops cutting: the rest of what is said is one utterance.
func TestAdaptiveSilenceWaitsForASlowSpeaker(t *testing.T) {
	pcm := spokenWith(t, slowWords, func(int) time.Duration { return 700 * time.Millisecond })

	fixed := ends(run(t, endpointer(t, voice.EndpointConfig{}), pcm, nil))
	if len(fixed) < len(slowWords)-1 {
		t.Fatalf("the fixed silence ended %d utterances in %d words paused 700 ms; the test's pauses are too short to show anything", len(fixed), len(slowWords))
	}

	e := endpointer(t, voice.EndpointConfig{AdaptiveMax: 2 * time.Second})
	adaptive := ends(run(t, e, pcm, nil))
	t.Logf("fixed: %d utterances; adaptive: %d, silence now %v", len(fixed), len(adaptive), e.Silence())
	if len(adaptive) > minLearned+1 {
		t.Fatalf("adaptive: %d utterances; want the speaker cut off only while their pauses are learned (at most %d)", len(adaptive), minLearned+1)
	}
	if s := e.Silence(); s < 800*time.Millisecond || s > 1200*time.Millisecond {
		t.Fatalf("silence %v after pauses of 700 ms; want a little more than the pause", s)
	}
}

// minLearned is how many pauses the endpointer learns before it adapts.
const minLearned = 4

// A quick speaker's short pauses shorten the silence that ends the
// utterance, never below the minimum; without adaptation it stays put.
func TestAdaptiveSilenceAnswersAQuickSpeakerSooner(t *testing.T) {
	pcm := spokenWith(t, slowWords, func(int) time.Duration { return 150 * time.Millisecond })

	fixed := endpointer(t, voice.EndpointConfig{})
	f := ends(run(t, fixed, pcm, nil))
	e := endpointer(t, voice.EndpointConfig{AdaptiveMin: 300 * time.Millisecond, AdaptiveMax: 2 * time.Second})
	a := ends(run(t, e, pcm, nil))
	if len(f) != 1 || len(a) != 1 {
		t.Fatalf("%d and %d utterances; want one each", len(f), len(a))
	}
	t.Logf("ended after %v of silence (fixed %v)", a[0].ev.Trailing, f[0].ev.Trailing)
	if fixed.Silence() != 500*time.Millisecond || f[0].ev.Trailing != 500*time.Millisecond {
		t.Fatalf("fixed: silence %v, trailing %v; want 500 ms", fixed.Silence(), f[0].ev.Trailing)
	}
	if s := e.Silence(); s < 300*time.Millisecond || s >= 500*time.Millisecond || a[0].ev.Trailing < s || a[0].ev.Trailing >= s+voice.FrameDuration {
		t.Fatalf("adaptive: silence %v, trailing %v; want within [300 ms, 500 ms) and the utterance ended by it", s, a[0].ev.Trailing)
	}
}

// The bounds hold whatever the speaker does.
func TestAdaptiveSilenceBounds(t *testing.T) {
	pcm := spokenWith(t, slowWords, func(i int) time.Duration { return time.Duration(300+i*100) * time.Millisecond })
	e := endpointer(t, voice.EndpointConfig{AdaptiveMin: 200 * time.Millisecond, AdaptiveMax: 800 * time.Millisecond})
	run(t, e, pcm, nil)
	if s := e.Silence(); s != 800*time.Millisecond {
		t.Fatalf("silence %v after pauses up to 1.4 s; want the bound, 800 ms", s)
	}
}
