package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

type observerFunc func(pipeline.TurnReport)

func (f observerFunc) TurnEnded(r pipeline.TurnReport) { f(r) }

// A turn reports once it is over, with its model stages in order; a
// speaker that measures it holds the report until it adds its own
// stages, and says whether it cut the answer short.
func TestTurnReportWaitsForItsSpeaker(t *testing.T) {
	store := storage.NewMemory(storage.ReasoningPlain)
	reports := make(chan pipeline.TurnReport, 4)
	e := pipeline.NewEngine(pipeline.Config{LLM: newModel(plain), Thinking: true, Telemetry: observerFunc(func(r pipeline.TurnReport) { reports <- r })}, store)
	c := e.Open("conv_report")
	defer c.Close()
	type measured struct {
		turn   *pipeline.Turn
		report func(bool, ...pipeline.Timed)
	}
	speaking := make(chan measured, 2)
	c.Attach(speakerFunc(func(t *pipeline.Turn) { speaking <- measured{t, t.Measure()} }))
	face := newFace(streamingFull)

	c.Handle(face, pipeline.Inbound{From: "alice", StanzaID: 1, Body: &wire.UserMessage{ID: "msg_1", ConversationID: "conv_report", Content: "typed"}, Received: time.Now()})
	m := <-speaking
	<-m.turn.Done()
	// A turn reports before Done when it reports at its end: none yet.
	if len(reports) != 0 {
		t.Fatalf("reported while its speaker holds it: %+v", <-reports)
	}
	tm := m.turn.Timing()
	if tm.Asked.IsZero() || tm.FirstToken.Before(tm.Asked) || tm.FirstSentence.Before(tm.FirstToken) {
		t.Fatalf("timing %+v", tm)
	}
	spoke := pipeline.Timed{Name: "first_audio", Start: tm.Asked, End: tm.FirstSentence.Add(time.Millisecond)}
	m.report(true, spoke)
	m.report(false) // once only
	r := <-reports
	if len(reports) != 0 {
		t.Fatal("reported twice")
	}
	want := []pipeline.Timed{{Name: pipeline.StageModelFirstToken, Start: tm.Asked, End: tm.FirstToken},
		{Name: pipeline.StageFirstSentence, Start: tm.Asked, End: tm.FirstSentence}, spoke}
	if r.UserMessageID != "msg_1" || r.ConversationID != "conv_report" || r.AnswerID != m.turn.AnswerID() || r.Spoken || !r.Interrupted ||
		len(r.Stages) != len(want) || !r.Start.Equal(tm.Asked) || r.End.Before(spoke.End) {
		t.Fatalf("report %+v", r)
	}
	for i := range want {
		if r.Stages[i].Name != want[i].Name || !r.Stages[i].Start.Equal(want[i].Start) || !r.Stages[i].End.Equal(want[i].End) {
			t.Fatalf("stage %d: %+v, want %+v", i, r.Stages[i], want[i])
		}
	}

	// A spoken turn whose speaker is done before it ends reports at its
	// end, as spoken and not interrupted.
	spoken := c.Ask(context.Background(), face, "alice", &wire.UserMessage{ID: "msg_2", Content: "spoken"}, pipeline.Spoken())
	m = <-speaking
	m.report(false)
	<-spoken.Done()
	select {
	case r = <-reports:
	default:
		t.Fatal("no report by the end of the turn")
	}
	if r.UserMessageID != "msg_2" || !r.Spoken || r.Interrupted || len(r.Stages) != 2 {
		t.Fatalf("report %+v", r)
	}
}
