package voice_test

import (
	"context"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/telemetry"
	"github.com/alicia-voice/alicia/internal/telemetry/telemetrytest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	llmstandin "github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// streamingFace is the engine's face of a test: one streaming member,
// and nothing sent anywhere.
type streamingFace struct{}

func (streamingFace) Send(wire.Body, ...string) {}
func (streamingFace) Members() []pipeline.Member {
	return []pipeline.Member{{Identity: "alice", Features: wire.Features{Streaming: true}}}
}

// reported passes each turn's report on to the telemetry, then to the
// test.
type reported struct {
	next pipeline.TurnObserver
	ch   chan pipeline.TurnReport
}

func (r reported) TurnEnded(rep pipeline.TurnReport) {
	r.next.TurnEnded(rep)
	r.ch <- rep
}

// A spoken question through the stage and the engine, with the model and
// speech stand-ins, gives one sample of each stage of the voice turn
// histogram, and one trace: a "turn" span with a child span per stage,
// exported to an OTLP receiver. A turn slower than SlowTurn (here any)
// is logged with its stages.
func TestVoiceTurnTelemetry(t *testing.T) {
	rx := telemetrytest.NewReceiver(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	tp, shutdown, err := telemetry.Tracing(ctx, log)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	obs := reported{telemetry.NewTurns(reg, tp), make(chan pipeline.TurnReport, 4)}

	ms, _ := llmstandin.New(nil, llmstandin.Pacing{TTFTMs: 5, TokenMs: 1}, nil)
	model := httptest.NewServer(ms.Handler())
	defer model.Close()
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	engine := pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true, Telemetry: obs, Logger: log}, storage.NewMemory(storage.ReasoningPlain))
	conv := engine.Open("conv_voice_telemetry")
	defer conv.Close()

	base, _ := speechServer(t)
	room := newRoom(true)
	out := &fakeOut{speed: 20}
	cfg := voice.Config{
		Recognizer:  &speech.RealtimeRecognizer{URL: base, Model: "whisper-1"},
		Synthesizer: &speech.OpenAISynthesizer{URL: base, Model: "tts-1"},
		EchoWarmup:  -1,
		SlowTurn:    time.Nanosecond,
		Logger:      log,
	}
	st, leave := voice.Join(cfg, conv, streamingFace{}, room, out)
	defer leave()
	done := make(chan struct{})
	go func() { defer close(done); st.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// The room's transcripts are read, so that the stage never waits on
	// them.
	go func() {
		for {
			select {
			case <-room.transcripts:
			case <-room.speech:
			case <-done:
				return
			}
		}
	}()

	in := st.Listen("alice", "TR_alice")
	feed(in, append(append(speechtest.Silence(500, voice.InputRate), speechtest.Render(t, question, 140, voice.InputRate)...), speechtest.Silence(1500, voice.InputRate)...))
	var rep pipeline.TurnReport
	select {
	case rep = <-obs.ch:
	case <-time.After(60 * time.Second):
		t.Fatal("no turn report")
	}
	if !rep.Spoken || rep.Interrupted || rep.ConversationID != "conv_voice_telemetry" || !strings.HasPrefix(rep.UserMessageID, "msg") {
		t.Fatalf("report %+v", rep)
	}

	stages := []string{voice.StageEndpointing, voice.StageRecognition, pipeline.StageModelFirstToken, pipeline.StageFirstSentence,
		voice.StageSynthesisFirstByte, voice.StageFirstAudio, voice.StageFirstAnswerAudio, voice.StageOwn}
	want := map[string]uint64{}
	for _, s := range stages {
		want[s] = 1
	}
	if got := telemetrytest.Samples(t, reg, "alicia_voice_turn_stage_seconds", "stage"); !maps.Equal(got, want) {
		t.Fatalf("alicia_voice_turn_stage_seconds samples %v; want %v", got, want)
	}
	if got := telemetrytest.Samples(t, reg, "alicia_turn_stage_seconds", "stage"); got[pipeline.StageModelFirstToken] != 1 || got[pipeline.StageFirstSentence] != 1 {
		t.Fatalf("alicia_turn_stage_seconds samples %v", got)
	}
	if got := telemetrytest.Samples(t, reg, "alicia_voice_barge_in_seconds", ""); got[""] != 0 {
		t.Fatalf("%d barge-ins in a turn nobody talked over", got[""])
	}
	for _, s := range rep.Stages {
		t.Logf("%-20s %6.0f ms", s.Name, float64(s.End.Sub(s.Start))/float64(time.Millisecond))
	}

	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := rx.Spans()
	turns := telemetrytest.Named(spans, "turn")
	if len(turns) != 1 {
		t.Fatalf("%d turn spans", len(turns))
	}
	turn := turns[0]
	if telemetrytest.Attr(turn, "alicia.user_message_id").GetStringValue() != rep.UserMessageID || !telemetrytest.Attr(turn, "alicia.spoken").GetBoolValue() {
		t.Fatalf("turn span attributes %v", turn.Attributes)
	}
	slices.Sort(stages)
	if got := telemetrytest.Children(t, spans, turn); !slices.Equal(got, stages) {
		t.Fatalf("the turn's child spans %v; want %v", got, stages)
	}

	// Logged once, with each stage.
	if n := strings.Count(logs.String(), `msg="slow voice turn"`); n != 1 {
		t.Fatalf("%d slow turn logs:\n%s", n, logs.String())
	}
	for _, s := range stages {
		if !strings.Contains(logs.String(), " "+s+"_ms=") {
			t.Fatalf("the slow turn log has no %s:\n%s", s, logs.String())
		}
	}
}
