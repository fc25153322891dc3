package voice_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/wire"
)

// Talk over the agent is judged by its words, not by its length, at the
// default settings. A spoken "okay right", longer than the half second
// that used to make any talk an interruption, pauses the agent at its
// onset; its transcript holds only backchannels, so the agent resumes
// where it paused: the answer is heard whole, nothing is cleared or
// asked, and it counts as one false interruption. Sound without words
// that lasts past MinInterruption cannot be a backchannel, and stops the
// agent although nothing was recognised in it.
func TestStageWordsDecideNotDuration(t *testing.T) {
	base := speechtest.Server(t, question, "okay right", "uh huh") + "/v1"
	answer := []pipeline.Sentence{
		{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."},
		{Sequence: 2, Text: "Take a coat."},
	}
	whole := "The weather in Paris is mild today, with a light breeze from the west. Take a coat."

	t.Run("backchannel", func(t *testing.T) {
		sp := speakAnswer(t, base, answer)
		room, out, obs, turn, eng := sp.room, sp.out, sp.obs, sp.turn, sp.eng
		okay := speechtest.Trim(speechtest.Render(t, "okay right", 140, voice.InputRate))
		if d := time.Duration(len(okay)) * time.Second / voice.InputRate; d <= 500*time.Millisecond {
			t.Fatalf("the backchannel lasts %v: no longer than the old minimum", d)
		}
		feed(sp.in, append(okay, speechtest.Silence(1000, voice.InputRate)...))
		wait(t, obs.falses, "the agent resumed")
		heard, _ := transcript(t, room, sp.first)
		out.mu.Lock()
		pauses, resumes, clears := out.pauses, out.resumes, out.clears
		out.mu.Unlock()
		if heard != whole || pauses != 1 || resumes != 1 || clears != 0 || len(turn.interrupts) != 0 || len(eng.started) != 0 || obs.interrupted.Load() != 0 {
			t.Fatalf("%d pauses, %d resumes, %d clears, %d interrupts, %d turns, %d interruptions counted; the agent said %q",
				pauses, resumes, clears, len(turn.interrupts), len(eng.started), obs.interrupted.Load(), heard)
		}
		// What the recogniser made of it went out as the speaker's interim
		// transcript and was taken back: words, judged backchannels.
		var shown []string
		for len(room.transcripts) > 0 {
			tr := <-room.transcripts
			if tr.Final {
				t.Fatalf("a final transcript of the backchannel: %+v", tr)
			}
			shown = append(shown, tr.Text)
		}
		if !slices.Contains(shown, "okay right") || shown[len(shown)-1] != "" {
			t.Fatalf("the speaker's transcripts: %q; want the backchannel shown, then taken back", shown)
		}
	})

	t.Run("long sound", func(t *testing.T) {
		sp := speakAnswer(t, base, answer)
		feed(sp.in, append(speechtest.Hum(2500, voice.InputRate), speechtest.Silence(800, voice.InputRate)...))
		if got := wait(t, sp.turn.interrupts, "the interruption"); got.kind != wire.StopAll || got.heard == nil || !strings.HasPrefix(whole, got.heard.Text) {
			t.Fatalf("interrupt %+v", got)
		}
		if n := sp.obs.interrupted.Load(); n != 1 {
			t.Fatalf("%d interruptions counted", n)
		}
	})
}

// speaking is a stage at the default turn-taking settings speaking an
// answer, whose first words are out, to alice, who is listened to.
type speaking struct {
	room  *fakeRoom
	out   *fakeOut
	obs   *signalled
	turn  *fakeTurn
	eng   *fakeEngine
	in    *voice.Input
	first voice.AgentSpeech
}

func speakAnswer(t *testing.T, base string, answer []pipeline.Sentence) *speaking {
	t.Helper()
	sp := &speaking{room: newRoom(true), out: &fakeOut{speed: 1}, obs: &signalled{falses: make(chan struct{}, 4)}, turn: newTurn(answer...),
		eng: &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return nil }}}
	sp.turn.finish()
	st := newStage(t, base, sp.eng, sp.room, sp.out, func(c *voice.Config) { c.Observer = sp.obs })
	sp.in = st.Listen("alice", "TR_alice")
	st.SpeakTurn(sp.turn)
	sp.first = wait(t, sp.room.speech, "the answer's first words")
	return sp
}
