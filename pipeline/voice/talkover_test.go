package voice_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/wire"
)

// signalled is an Observer that says each false interruption on a
// channel, so that a test waits for the stage's decision instead of
// polling for it.
type signalled struct {
	observed
	falses chan struct{}
}

func (o *signalled) FalseInterruption() {
	o.observed.FalseInterruption()
	o.falses <- struct{}{}
}

// A transcript that comes after FalseInterruption resumed the agent is
// still judged as the talk over the agent it was. Only backchannels
// ("uh huh" from a slow recogniser): nothing starts, the answer that
// resumed plays on, and one that has ended since is not followed by a
// turn either. Words: the user did interrupt, the recogniser was only
// slow, so the answer stops where it is heard and the words are asked,
// as LiveKit Agents does with a transcript that comes after its
// false-interruption timer.
func TestStageFalseInterruptionLateTranscript(t *testing.T) {
	for _, tc := range []struct {
		name, heard string
		interrupts  bool
		// ended: the answer ends before the transcript comes.
		ended bool
	}{
		{"backchannel", "uh huh", false, false},
		{"backchannel after the answer", "uh huh", false, true},
		{"words", "stop please", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room := newRoom(true)
			out := &fakeOut{speed: 1}
			obs := &signalled{falses: make(chan struct{}, 4)}
			rec := &heldRecognizer{text: tc.heard, release: make(chan struct{}), requests: make(chan struct{}, 4)}
			// Unless it is to end, the answer is still being generated: it
			// plays for as long as the test needs.
			long := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."})
			if tc.ended {
				long.finish()
			}
			next := newTurn(pipeline.Sentence{Sequence: 1, Text: "Stopped."})
			next.finish()
			eng := &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return next }}
			st := newStage(t, "", eng, room, out, func(c *voice.Config) {
				c.Recognizer, c.Synthesizer, c.Observer, c.FalseInterruption, c.InterimEvery = rec, toneSynth{}, obs, 200*time.Millisecond, -1
			})
			in := st.Listen("alice", "TR_alice")
			st.SpeakTurn(long)
			wait(t, room.speech, "the first words")
			feed(in, append(speechtest.Hum(300, voice.InputRate), speechtest.Silence(700, voice.InputRate)...))
			wait(t, rec.requests, "the talk-over's recognition, held")
			wait(t, obs.falses, "the agent resumed by FalseInterruption")
			want := voice.StateSpeaking
			if tc.ended {
				want = voice.StateListening
				for st.State(context.Background()) != want {
					// The rest of the answer plays out in real time.
					time.Sleep(20 * time.Millisecond)
				}
			}
			rec.release <- struct{}{}

			if tc.interrupts {
				if got := wait(t, long.interrupts, "the answer stopped by the late words"); got.kind != wire.StopAll || got.heard == nil {
					t.Fatalf("interrupt %+v", got)
				}
				if s := wait(t, eng.started, "the late words asked"); s.text != tc.heard {
					t.Fatalf("asked %+v", s)
				}
				if n := obs.interrupted.Load(); n != 1 {
					t.Fatalf("%d interruptions counted", n)
				}
				return
			}
			// Barrier: recognition is in order, so once the next
			// utterance is being recognised the late transcript was
			// judged, and whatever it asked was handed to the stage,
			// whose state is then read after it.
			feed(in, append(speechtest.Hum(300, voice.InputRate), speechtest.Silence(700, voice.InputRate)...))
			wait(t, rec.requests, "the next utterance's recognition")
			state := st.State(context.Background())
			out.mu.Lock()
			clears := out.clears
			out.mu.Unlock()
			long.mu.Lock()
			heard := long.heard
			long.mu.Unlock()
			if len(eng.started) != 0 || len(long.interrupts) != 0 || clears != 0 || heard != nil || state != want || obs.interrupted.Load() != 0 {
				var asked []started
				for len(eng.started) > 0 {
					asked = append(asked, <-eng.started)
				}
				t.Fatalf("a late %q asked %+v, %d interrupts, %d clears, heard %+v, agent %s, %d interruptions counted",
					tc.heard, asked, len(long.interrupts), clears, heard, state, obs.interrupted.Load())
			}
		})
	}
}

// partialRecognizer says partial, then final.
type partialRecognizer struct{ partial, final string }

func (r partialRecognizer) Stream(context.Context, *speech.RecognizeRequest) iter.Seq[speech.RecognizeEvent] {
	return func(yield func(speech.RecognizeEvent) bool) {
		if yield(speech.RecognizeEvent{Kind: speech.RecognizePartial, Text: r.partial}) {
			yield(speech.RecognizeEvent{Kind: speech.RecognizeFinal, Text: r.final})
		}
	}
}

// An interim transcript of talk over the agent that proves to be only a
// backchannel is taken back with an empty interim one, so that no client
// keeps showing a caption that never becomes a message; it is never made
// final, since a final transcript is the user's turn.
func TestStageBackchannelInterimTakenBack(t *testing.T) {
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	obs := &signalled{falses: make(chan struct{}, 4)}
	long := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."})
	eng := &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return nil }}
	st := newStage(t, "", eng, room, out, func(c *voice.Config) {
		c.Recognizer, c.Synthesizer, c.Observer, c.InterimEvery = partialRecognizer{"uh", "uh huh"}, toneSynth{}, obs, -1
	})
	in := st.Listen("alice", "TR_alice")
	st.SpeakTurn(long)
	wait(t, room.speech, "the first words")
	feed(in, append(speechtest.Hum(300, voice.InputRate), speechtest.Silence(700, voice.InputRate)...))
	shown := wait(t, room.transcripts, "the interim transcript")
	if shown.Final || shown.Text != "uh" {
		t.Fatalf("first transcript %+v", shown)
	}
	wait(t, obs.falses, "the agent resumed on the backchannel")
	if got := wait(t, room.transcripts, "the interim transcript taken back"); got.ID != shown.ID || got.Final || got.Text != "" || got.Speaker != "alice" || got.TrackID != "TR_alice" {
		t.Fatalf("after %+v: %+v", shown, got)
	}
	if len(eng.started) != 0 {
		t.Fatalf("the backchannel asked %+v", <-eng.started)
	}
}

// An answer heard to its last word is not cut by a turn that begins
// before the stage heard that it ended: its transcript stays final and
// nothing is reported heard of a cut answer, so it is stored complete.
func TestStageAnswerHeardWholeIsNotCut(t *testing.T) {
	base, _ := speechServer(t)
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	st := newStage(t, base, &fakeEngine{started: make(chan started, 1)}, room, out)
	answer := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather is fine today in the city."})
	answer.id = "msg_answer"
	answer.finish()
	st.SpeakTurn(answer)
	if sp := wait(t, room.speech, "the answer's first words"); sp.Final {
		t.Fatalf("the answer was over at its first words: %+v", sp)
	}
	// The next turn comes while the answer plays its last words, and
	// waits behind the stage's goroutine until they are out.
	release := st.Hold()
	next := newTurn()
	next.id = "msg_next"
	st.SpeakTurn(next)
	for sp := wait(t, room.speech, "the answer's words"); !sp.Final; sp = wait(t, room.speech, "the answer's words") {
		if sp.Cut {
			t.Fatalf("cut while playing: %+v", sp)
		}
	}
	release()
	st.State(context.Background()) // a barrier: the next turn has begun
	for len(room.speech) > 0 {
		if sp := <-room.speech; sp.Cut {
			t.Fatalf("the answer heard whole was cut: %+v", sp)
		}
	}
	answer.mu.Lock()
	heard := answer.heard
	answer.mu.Unlock()
	if heard != nil {
		t.Fatalf("the answer heard whole was reported cut, heard %+v", *heard)
	}
}
