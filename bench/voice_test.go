package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
)

// The voice benchmark at two users, each asking a question and talking
// over its answer, so that it cannot rot: every spoken turn is heard,
// transcribed and answered aloud, the interruption silences the bot, and
// the bot's histograms hold a sample of every stage of every turn.
func TestVoiceBenchmark(t *testing.T) {
	testenv.RealTime(t)
	bin := processTest(t, "runs the voice benchmark: livekit-server, the bot and the speech servers")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out strings.Builder
	reps, err := voiceBench(ctx, options{ns: []int{2}, turns: 1, interruptEvery: 1, voiceCycle: time.Second,
		think: time.Second, turnTimeout: time.Minute, joinParallel: 2, pace: "realistic", reasoning: "on", postgres: "on",
		sttTransport: "realtime", mic: "dtx", bot: bin}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.users != 2 || len(r.joinFailures) > 0 {
		t.Fatalf("%d users joined; failures: %v", r.users, r.joinFailures)
	}
	// A turn is lost only if the bot is to blame: the stand-in recogniser
	// (pocketsphinx) now and then returns no words for speech that came
	// through, which the bot counts and answers with no turn, rightly.
	interrupted, measured, unheard := 0, 0, 0
	for i, turn := range r.turns {
		switch {
		case turn.err == "no final transcription":
			unheard++
		case turn.err != "":
			t.Errorf("turn %d: %s", i, turn.err)
		case turn.final <= 0 || turn.firstAudio <= 0 || turn.firstAnswer <= 0:
			t.Errorf("turn %d: not measured: %+v", i, turn)
		default:
			measured++
		}
		if turn.interrupted {
			interrupted++
		}
	}
	if unheard != r.unrecognised() {
		t.Errorf("%d spoken turns got no transcript, and the bot counted %d utterances the recogniser gave no words for", unheard, r.unrecognised())
	}
	if measured == 0 {
		t.Fatal("no turn was measured")
	}
	// One turn each, talked over unless its answer was over first; the
	// interruption is a turn of its own.
	if interrupted == 0 || len(r.turns) != 2+interrupted {
		t.Errorf("%d turns, %d talked over; want 2 and one more for each interruption, at least one", len(r.turns), interrupted)
	}
	for _, st := range breakdown {
		if got := int(r.stages[st].count); got != len(r.turns)-unheard {
			t.Errorf("the bot's %s histogram has %d samples for %d spoken turns it heard", st, got, len(r.turns)-unheard)
		}
	}
	if got := int(r.stages["barge_in"].count); got < interrupted {
		t.Errorf("the bot's barge-in histogram has %d samples for %d interruptions", got, interrupted)
	}
}
