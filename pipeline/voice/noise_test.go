package voice_test

import (
	"testing"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

// noisy is an Observer that says on a channel each sound it was told
// was ignored as noise or resumed after, so that a test waits for the
// stage's decision.
type noisy struct {
	observed
	decided chan struct{}
}

func (o *noisy) NoiseIgnored() {
	o.observed.NoiseIgnored()
	o.decided <- struct{}{}
}

func (o *noisy) FalseInterruption() {
	o.observed.FalseInterruption()
	o.decided <- struct{}{}
}

// talkedOver is what became of an answer with a sound over it: how often
// its audio paused, resumed and was cleared, what of it was heard, and
// what the Observer was told.
type talkedOver struct {
	pauses, resumes, clears, interrupts, turns int
	said                                       string
	obs                                        *noisy
}

// overTheAnswer plays sound over an answer, 200 ms into its first words,
// with a recogniser that hears no word in it, and returns once the stage
// decided it was noise or resumed after it, and the answer was spoken
// whole.
func overTheAnswer(t *testing.T, sound []int16) talkedOver {
	t.Helper()
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	obs := &noisy{decided: make(chan struct{}, 4)}
	turn := newTurn(
		pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."},
		pipeline.Sentence{Sequence: 2, Text: "Take a coat."},
	)
	turn.finish()
	eng := &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return nil }}
	st := newStage(t, "", eng, room, out, func(c *voice.Config) {
		c.Recognizer, c.Synthesizer, c.Observer, c.InterimEvery = scriptedRecognizer{""}, toneSynth{}, obs, -1
	})
	in := st.Listen("alice", "TR_alice")
	st.SpeakTurn(turn)
	first := wait(t, room.speech, "the first words")
	feed(in, append(append(speechtest.Silence(200, voice.InputRate), sound...), speechtest.Silence(800, voice.InputRate)...))
	wait(t, obs.decided, "the stage's decision on the sound")
	said, _ := transcript(t, room, first)
	out.mu.Lock()
	defer out.mu.Unlock()
	return talkedOver{pauses: out.pauses, resumes: out.resumes, clears: out.clears, interrupts: len(turn.interrupts),
		turns: len(eng.started), said: said, obs: obs}
}

const whole = "The weather in Paris is mild today, with a light breeze from the west. Take a coat."

// A sound that is not speech over the agent, up to 400 ms of it (a burst
// of noise, a cough, a click), leaves no gap: the agent does not pause,
// the answer is spoken whole, and the Observer hears of one noise
// ignored, not of a false interruption.
func TestStageNoiseLeavesNoGap(t *testing.T) {
	for _, s := range []sound{
		{"burst", func(testing.TB) []int16 { return speechtest.Burst(300, voice.InputRate, -20, 7) }},
		{"loud pink noise", func(t testing.TB) []int16 { return speechtest.SoxNoise(t, "pinknoise", 400, voice.InputRate, -6) }},
		{"cough", func(t testing.TB) []int16 { return speechtest.Cough(t, 300, voice.InputRate, -12) }},
		{"click", func(testing.TB) []int16 { return speechtest.Click(150, voice.InputRate) }},
	} {
		t.Run(s.name, func(t *testing.T) {
			got := overTheAnswer(t, s.make(t))
			if got.pauses != 0 || got.resumes != 0 || got.clears != 0 || got.interrupts != 0 || got.turns != 0 || got.said != whole ||
				got.obs.noise.Load() != 1 || got.obs.falseInterruptions.Load() != 0 || got.obs.interrupted.Load() != 0 {
				t.Fatalf("%+v; %d noises ignored, %d false interruptions, %d interruptions counted",
					got, got.obs.noise.Load(), got.obs.falseInterruptions.Load(), got.obs.interrupted.Load())
			}
		})
	}
}

// Words that begin without pitch ("stop", "so", "tell me", "what") pause
// the agent all the same, when their vowel comes; heard to hold no word,
// the agent resumes, and they are not counted as noise.
func TestStageSpeechPausesWhenItsVoiceShows(t *testing.T) {
	for _, text := range []string{"stop", "so", "tell me", "what"} {
		t.Run(text, func(t *testing.T) {
			words := speechtest.Trim(speechtest.Render(t, text, 140, voice.InputRate))
			got := overTheAnswer(t, words)
			if got.pauses != 1 || got.resumes != 1 || got.clears != 0 || got.said != whole || got.obs.noise.Load() != 0 {
				t.Fatalf("%+v; %d noises ignored", got, got.obs.noise.Load())
			}
		})
	}
}
