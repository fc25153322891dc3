package telemetry_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/alicia-voice/alicia/internal/telemetry"
	"github.com/alicia-voice/alicia/internal/telemetry/telemetrytest"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// face is an in-memory face with one streaming member.
type face struct{}

func (face) Send(wire.Body, ...string) {}
func (face) Members() []pipeline.Member {
	return []pipeline.Member{{Identity: "alice", Features: wire.Features{Streaming: true}}}
}

// reports passes each report on to the telemetry, then to the test.
type reports struct {
	next pipeline.TurnObserver
	ch   chan pipeline.TurnReport
}

func (r reports) TurnEnded(rep pipeline.TurnReport) {
	r.next.TurnEnded(rep)
	r.ch <- rep
}

// A typed turn through the engine and the model stand-in is traced over
// OTLP as a "turn" span with its model stages as children, and each of
// those stages is one sample of alicia_turn_stage_seconds, none of the
// voice histograms.
func TestTypedTurnTelemetry(t *testing.T) {
	rx := telemetrytest.NewReceiver(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	tp, shutdown, err := telemetry.Tracing(ctx, log)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	obs := reports{telemetry.NewTurns(reg, tp), make(chan pipeline.TurnReport, 4)}

	s, _ := standin.New(nil, standin.Pacing{TTFTMs: 5, TokenMs: 1}, nil)
	model := httptest.NewServer(s.Handler())
	defer model.Close()
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	engine := pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true, Telemetry: obs, Logger: log}, storage.NewMemory(storage.ReasoningPlain))
	conv := engine.Open("conv_typed")
	defer conv.Close()
	conv.Handle(face{}, pipeline.Inbound{From: "alice", StanzaID: 1, Received: time.Now(),
		Body: &wire.UserMessage{ID: "msg_typed", ConversationID: "conv_typed", Content: "What can you do?"}})
	var rep pipeline.TurnReport
	select {
	case rep = <-obs.ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no turn report")
	}
	if rep.UserMessageID != "msg_typed" || rep.ConversationID != "conv_typed" || rep.Spoken || rep.Interrupted {
		t.Fatalf("report %+v", rep)
	}

	if got := telemetrytest.Samples(t, reg, "alicia_turn_stage_seconds", "stage"); got[pipeline.StageModelFirstToken] != 1 || got[pipeline.StageFirstSentence] != 1 || len(got) != 2 {
		t.Fatalf("alicia_turn_stage_seconds samples %v; want one of each model stage", got)
	}
	for stage, n := range telemetrytest.Samples(t, reg, "alicia_voice_turn_stage_seconds", "stage") {
		if n != 0 {
			t.Fatalf("a typed turn gave %d samples of the voice stage %s", n, stage)
		}
	}

	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := rx.Spans()
	turns := telemetrytest.Named(spans, "turn")
	if len(turns) != 1 {
		t.Fatalf("%d turn spans in %d", len(turns), len(spans))
	}
	turn := turns[0]
	if telemetrytest.Attr(turn, "alicia.user_message_id").GetStringValue() != "msg_typed" || telemetrytest.Attr(turn, "alicia.conversation_id").GetStringValue() != "conv_typed" ||
		telemetrytest.Attr(turn, "alicia.spoken") == nil || telemetrytest.Attr(turn, "alicia.spoken").GetBoolValue() {
		t.Fatalf("turn span attributes %v", turn.Attributes)
	}
	children := telemetrytest.Children(t, spans, turn)
	if want := []string{pipeline.StageFirstSentence, pipeline.StageModelFirstToken}; !slices.Equal(children, want) {
		t.Fatalf("the turn's child spans %v; want %v", children, want)
	}
}

// Without an OTLP endpoint in the environment no trace is made.
func TestTracingOffWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tp, shutdown, err := telemetry.Tracing(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	_, sp := tp.Tracer("test").Start(context.Background(), "turn")
	defer sp.End()
	if sp.IsRecording() || sp.SpanContext().IsValid() {
		t.Fatal("a span is recorded with tracing off")
	}
}

// The engine's preemptive turns are counted by outcome, each outcome on
// /metrics from the start.
func TestPreemptiveTurnsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	turns := telemetry.NewTurns(reg, nil)
	var obs pipeline.PreemptionObserver = turns
	obs.Preempted(pipeline.PreemptTaken)
	obs.Preempted(pipeline.PreemptTaken)
	obs.Preempted(pipeline.PreemptUsed)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "alicia_voice_preemptive_turns_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{pipeline.PreemptTaken: 2, pipeline.PreemptUsed: 1, pipeline.PreemptDiscarded: 0}
	if len(got) != len(want) || got[pipeline.PreemptTaken] != 2 || got[pipeline.PreemptUsed] != 1 || got[pipeline.PreemptDiscarded] != 0 {
		t.Fatalf("alicia_voice_preemptive_turns_total = %v, want %v", got, want)
	}
}
