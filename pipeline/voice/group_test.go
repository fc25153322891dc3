package voice_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

// Two people in one room: bob speaks while the answer to alice's
// question is still being thought. His words are a question of his own,
// under his own message, never added to hers (only a speaker who goes on
// adds to their own question); every transcript names its speaker.
func TestStageAnotherSpeakerWhileThinking(t *testing.T) {
	base, _ := speechServer(t)
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	thinking := newTurn() // no sentence: the model is still reasoning
	next := newTurn(pipeline.Sentence{Sequence: 1, Text: "Good."})
	next.finish()
	eng := &fakeEngine{started: make(chan started, 4), accept: func(text string) *fakeTurn {
		if strings.Contains(text, "moon") {
			return next
		}
		return thinking
	}}
	st := newStage(t, base, eng, room, out, func(c *voice.Config) { c.CueAfter = time.Minute })
	alice, bob := st.Listen("alice", "TR_alice"), st.Listen("bob", "TR_bob")
	feed(alice, append(speechtest.Render(t, question, 140, voice.InputRate), speechtest.Silence(800, voice.InputRate)...))
	first := wait(t, eng.started, "alice's question")
	feed(bob, append(speechtest.Render(t, other, 140, voice.InputRate), speechtest.Silence(800, voice.InputRate)...))
	second := wait(t, eng.started, "bob's question")
	t.Logf("%s asked %q, then %s %q", first.speaker, first.text, second.speaker, second.text)
	if first.speaker != "alice" || second.speaker != "bob" || second.id == first.id ||
		speechtest.WER(other, second.text) > 0.2 || strings.Contains(second.text, "paris") {
		t.Fatalf("first %+v, then %+v", first, second)
	}
	// The stage is ordered: once its state is read, nothing more is asked.
	st.State(context.Background())
	if len(eng.started) != 0 {
		t.Fatalf("%d more turns", len(eng.started))
	}
	want := map[string]string{first.id: "alice", second.id: "bob"}
	for len(room.transcripts) > 0 {
		tr := <-room.transcripts
		if who, ok := want[tr.ID]; ok && tr.Speaker != who {
			t.Fatalf("transcript %+v: want speaker %s", tr, who)
		}
		if tr.Final && tr.Text != "" && tr.ID != first.id && tr.ID != second.id {
			t.Fatalf("a final transcript of no question: %+v", tr)
		}
	}
}
