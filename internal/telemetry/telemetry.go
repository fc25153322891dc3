// Package telemetry records what each turn took: Prometheus histograms of
// its stages and, when an OTLP endpoint is configured, a trace of it.
// The engine and the voice stage time the turn where things happen; the
// turn's report comes here once it is over (pipeline.TurnObserver), so
// that nothing is exported on their way.
package telemetry

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

// buckets span 5 ms to 10 s: a barge-in's pause at the short end, a
// model's slow first sentence at the long one.
var buckets = []float64{.005, .01, .025, .05, .075, .1, .15, .2, .3, .4, .5, .75, 1, 1.5, 2, 3, 5, 7.5, 10}

// Turns is the engine's TurnObserver: it records each turn's stages.
type Turns struct {
	voice   *prometheus.HistogramVec
	model   *prometheus.HistogramVec
	bargeIn prometheus.Histogram
	preempt *prometheus.CounterVec
	tracer  trace.Tracer
}

var (
	_ pipeline.TurnObserver       = (*Turns)(nil)
	_ pipeline.PreemptionObserver = (*Turns)(nil)
)

// voiceStages are the stages of a spoken turn, listed so that /metrics
// shows each from the start.
var voiceStages = []string{voice.StageEndpointing, voice.StageRecognition, pipeline.StageModelFirstToken, pipeline.StageFirstSentence,
	voice.StageSynthesisFirstByte, voice.StageFirstAudio, voice.StageFirstAnswerAudio, voice.StageOwn}

// NewTurns registers the turn histograms on reg (nil: not exported) and
// traces turns with tp (nil: no traces).
func NewTurns(reg prometheus.Registerer, tp trace.TracerProvider) *Turns {
	t := &Turns{
		voice: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "voice", Name: "turn_stage_seconds", Buckets: buckets,
			Help: "Each stage of a spoken turn: endpointing and recognition (from the end of the user's speech), model_first_token and first_sentence (from the turn asked), synthesis_first_byte (from the sentence sent), first_audio (cue or answer) and first_answer_audio (from the end of speech), own (Alicia's own share of first_answer_audio: it less the waits on endpointing, recogniser, model and synthesiser)."},
			[]string{"stage"}),
		model: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "alicia", Name: "turn_stage_seconds", Buckets: buckets,
			Help: "The model's stages of every turn, typed or spoken, from the turn asked: model_first_token (reasoning or answer) and first_sentence."},
			[]string{"stage"}),
		bargeIn: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "alicia", Subsystem: "voice", Name: "barge_in_seconds", Buckets: buckets,
			Help: "From the onset of a user's speech over the agent to its audio paused (or stopped)."}),
		preempt: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "voice", Name: "preemptive_turns_total",
			Help: "Turns started, held, while the user paused (taken), then released when the final transcript matched (used) or cancelled without a trace (discarded)."},
			[]string{"outcome"}),
	}
	for _, o := range []string{pipeline.PreemptTaken, pipeline.PreemptUsed, pipeline.PreemptDiscarded} {
		t.preempt.WithLabelValues(o)
	}
	for _, s := range voiceStages {
		t.voice.WithLabelValues(s)
	}
	for _, s := range []string{pipeline.StageModelFirstToken, pipeline.StageFirstSentence} {
		t.model.WithLabelValues(s)
	}
	if reg != nil {
		reg.MustRegister(t.voice, t.model, t.bargeIn, t.preempt)
	}
	if tp != nil {
		t.tracer = tp.Tracer("github.com/alicia-voice/alicia")
	}
	return t
}

// Preempted counts a preemptive turn's outcome.
func (t *Turns) Preempted(outcome string) { t.preempt.WithLabelValues(outcome).Inc() }

// TurnEnded records a turn's report.
func (t *Turns) TurnEnded(r pipeline.TurnReport) {
	for _, s := range r.Stages {
		d := max(0, s.End.Sub(s.Start)).Seconds()
		switch s.Name {
		case voice.StageBargeIn:
			t.bargeIn.Observe(d)
		case pipeline.StageModelFirstToken, pipeline.StageFirstSentence:
			t.model.WithLabelValues(s.Name).Observe(d)
			if r.Spoken {
				t.voice.WithLabelValues(s.Name).Observe(d)
			}
		default:
			t.voice.WithLabelValues(s.Name).Observe(d)
		}
	}
	t.trace(r)
}

// trace exports the turn as a span with a child per stage, made after
// the fact with the times measured.
func (t *Turns) trace(r pipeline.TurnReport) {
	if t.tracer == nil {
		return
	}
	ctx, root := t.tracer.Start(context.Background(), "turn", trace.WithTimestamp(r.Start), trace.WithAttributes(
		attribute.String("alicia.conversation_id", r.ConversationID),
		attribute.String("alicia.user_message_id", r.UserMessageID),
		attribute.String("alicia.answer_id", r.AnswerID),
		attribute.Bool("alicia.spoken", r.Spoken),
		attribute.Bool("alicia.interrupted", r.Interrupted)))
	if !root.IsRecording() {
		return // tracing off or not sampled
	}
	for _, s := range r.Stages {
		attrs := make([]attribute.KeyValue, 0, len(s.Attrs)+1)
		attrs = append(attrs, attribute.Float64("alicia.seconds", max(0, s.End.Sub(s.Start)).Seconds()))
		for k, v := range s.Attrs {
			attrs = append(attrs, attribute.String("alicia."+k, v))
		}
		_, sp := t.tracer.Start(ctx, s.Name, trace.WithTimestamp(s.Start), trace.WithAttributes(attrs...))
		sp.End(trace.WithTimestamp(s.End))
	}
	root.End(trace.WithTimestamp(later(r.End, r.Start)))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
