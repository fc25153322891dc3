package voice_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/speech/standin"
	"github.com/alicia-voice/alicia/wire"
)

type fakeRoom struct {
	mu          sync.Mutex
	wants       bool
	cue         voice.CueMode
	states      []voice.State
	transcripts chan voice.Transcript
	speech      chan voice.AgentSpeech
}

func newRoom(wants bool) *fakeRoom {
	return &fakeRoom{wants: wants, transcripts: make(chan voice.Transcript, 100), speech: make(chan voice.AgentSpeech, 100)}
}

func (r *fakeRoom) Transcript(_ context.Context, t voice.Transcript) { r.transcripts <- t }
func (r *fakeRoom) AgentSpeech(_ context.Context, s voice.AgentSpeech) {
	r.speech <- s
}
func (r *fakeRoom) SpeechProblem(context.Context, voice.SpeechProblem) {}

func (r *fakeRoom) SetState(_ context.Context, s voice.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, s)
}

// Members is one client, which plays audio if wants, and asks for cue.
func (r *fakeRoom) Members() []pipeline.Member {
	m := pipeline.Member{Identity: "alice"}
	if r.wants {
		m.Features.AudioOutput = true
	}
	if r.cue != "" {
		m.Features.ThinkingCue = string(r.cue)
	}
	return []pipeline.Member{m}
}

// fakeOut plays at speed times real time, as a track would at 1.
type fakeOut struct {
	mu      sync.Mutex
	speed   float64
	playEnd time.Time
	written time.Duration
	clears  int
	keeps   int
	// paused holds held audio time until Resume.
	paused          bool
	held            time.Duration
	pauses, resumes int
}

func (o *fakeOut) Write(s []int16, rate int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := time.Duration(len(s)) * time.Second / time.Duration(rate)
	o.written += d
	if o.paused {
		o.held += d
		return nil
	}
	if now := time.Now(); o.playEnd.Before(now) {
		o.playEnd = now
	}
	o.playEnd = o.playEnd.Add(time.Duration(float64(d) / o.speed))
	return nil
}

// Keep shortens what is queued or held to d, as audio time.
func (o *fakeOut) Keep(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.keeps++
	if o.paused {
		o.held = min(o.held, d)
		return
	}
	if end := time.Now().Add(time.Duration(float64(d) / o.speed)); end.Before(o.playEnd) {
		o.playEnd = end
	}
}

func (o *fakeOut) Clear() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clears++
	o.playEnd = time.Now()
	o.paused, o.held = false, 0
}

// Pause holds what is queued, as audio time; writes while paused are
// counted into written as they come.
func (o *fakeOut) Pause() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.paused {
		o.paused, o.held = true, time.Duration(float64(max(0, time.Until(o.playEnd)))*o.speed)
		o.pauses++
	}
}

func (o *fakeOut) Resume() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.paused {
		o.paused = false
		o.playEnd = time.Now().Add(time.Duration(float64(o.held) / o.speed))
		o.resumes++
	}
}

func (o *fakeOut) Queued() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.paused {
		return o.held
	}
	return time.Duration(float64(max(0, time.Until(o.playEnd))) * o.speed)
}

func (o *fakeOut) TrackID() string { return "TR_bot" }

func (o *fakeOut) stats() (time.Duration, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.written, o.clears
}

// kept is how often the end of what was queued was dropped.
func (o *fakeOut) kept() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.keeps
}

type interrupt struct {
	kind  wire.StopType
	heard *pipeline.Heard
}

type fakeTurn struct {
	id         string
	sentences  chan pipeline.Sentence
	interrupts chan interrupt
	stop       sync.Once
	done       chan struct{}
	hushed     chan struct{}

	reports chan measured

	mu    sync.Mutex
	heard *pipeline.Heard
}

func newTurn(ss ...pipeline.Sentence) *fakeTurn {
	t := &fakeTurn{sentences: make(chan pipeline.Sentence, len(ss)), interrupts: make(chan interrupt, 4), done: make(chan struct{}), hushed: make(chan struct{}),
		reports: make(chan measured, 4)}
	for _, s := range ss {
		t.sentences <- s
	}
	return t
}

func (t *fakeTurn) finish() { t.stop.Do(func() { close(t.sentences); close(t.done) }) }

func (t *fakeTurn) UserMessageID() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id
}

func (t *fakeTurn) Sentences(ctx context.Context) iter.Seq[pipeline.Sentence] {
	return func(yield func(pipeline.Sentence) bool) {
		for {
			select {
			case s, ok := <-t.sentences:
				if !ok || !yield(s) {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
}

// Interrupt reports the heard part given before it, as the stage does.
func (t *fakeTurn) Interrupt(kind wire.StopType) bool {
	t.mu.Lock()
	h := t.heard
	t.mu.Unlock()
	t.interrupts <- interrupt{kind, h}
	if kind != wire.StopSpeech {
		t.finish()
	}
	return true
}

func (t *fakeTurn) Heard(h pipeline.Heard) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.heard = &h
}

func (t *fakeTurn) Speak() func()                      { return func() {} }
func (t *fakeTurn) SpeechInterrupted() <-chan struct{} { return t.hushed }

func (t *fakeTurn) Done() <-chan struct{} { return t.done }

func (t *fakeTurn) Timing() pipeline.Timing { return pipeline.Timing{} }

// measured is what the stage reported of a turn it was handed.
type measured struct {
	interrupted bool
	stages      []pipeline.Timed
}

// Measure passes on what the stage reports of the turn.
func (t *fakeTurn) Measure() func(bool, ...pipeline.Timed) {
	return func(interrupted bool, stages ...pipeline.Timed) {
		select {
		case t.reports <- measured{interrupted, stages}:
		default:
			panic("more reports than the test waits for")
		}
	}
}

type started struct{ speaker, id, text string }

// fakeEngine starts the turn accept gives for a final transcript and
// hands it to the stage, as the conversation does with its speaker.
type fakeEngine struct {
	accept  func(text string) *fakeTurn
	started chan started
	stage   *voice.Stage
}

func (e *fakeEngine) Ask(_ context.Context, speaker, id, text string) error {
	e.started <- started{speaker, id, text}
	t := e.accept(text)
	if t == nil {
		return errRefused
	}
	t.mu.Lock()
	t.id = id
	t.mu.Unlock()
	e.stage.SpeakTurn(t)
	return nil
}

type refused struct{}

func (refused) Error() string { return "refused" }

var errRefused = refused{}

const (
	question = "What is the weather like in Paris today?"
	other    = "How far is the moon?"
)

// speechServer is the stand-in, counting synthesis requests.
func speechServer(t testing.TB) (string, *atomic.Int32) {
	t.Helper()
	testenv.SpeechEngines(t)
	s, err := standin.New(standin.Config{Phrases: []string{question, other, "yes"}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var synth atomic.Int32
	h := s.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/audio/speech") {
			synth.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.Close(); s.Close() })
	return srv.URL + "/v1", &synth
}

// newStage runs a stage on the stand-in's speech, with the echo warm-up
// off unless a test turns it on: these agents' audio never comes back.
func newStage(t testing.TB, base string, e *fakeEngine, r voice.Room, out voice.AudioOut, opts ...func(*voice.Config)) *voice.Stage {
	t.Helper()
	cfg := voice.Config{
		Recognizer:  &speech.OpenAIRecognizer{URL: base, Model: "whisper-1", Streaming: true},
		Synthesizer: &speech.OpenAISynthesizer{URL: base, Model: "tts-1"},
		EchoWarmup:  -1,
		Logger:      slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	st := voice.New(cfg, e, r, out)
	e.stage = st
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); st.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return st
}

func feed(in *voice.Input, pcm []int16) {
	for len(pcm) > 0 {
		n := min(len(pcm), 320)
		_ = in.Write(pcm[:n])
		pcm = pcm[n:]
	}
}

func wait[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30 s", what)
	}
	var zero T
	return zero
}

// A spoken question gives interim transcripts, then a final one whose id
// starts the turn; the answer's sentences are spoken in order, code
// skipped and emphasis stripped, and the agent's state follows.
func TestStageSpeechTurn(t *testing.T) {
	base, _ := speechServer(t)
	for _, tc := range []struct {
		name string
		rec  voice.Recognizer
	}{
		{"uploaded", &speech.OpenAIRecognizer{URL: base, Model: "whisper-1", Streaming: true}},
		{"streamed", &speech.RealtimeRecognizer{URL: base, Model: "whisper-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) { stageSpeechTurn(t, tc.rec) })
	}
}

func stageSpeechTurn(t *testing.T, rec voice.Recognizer) {
	base, synth := speechServer(t)
	room := newRoom(true)
	out := &fakeOut{speed: 20}
	turn := newTurn(
		pipeline.Sentence{Sequence: 1, Text: "It is sunny in Paris."},
		pipeline.Sentence{Sequence: 2, Text: "```sh\ncurl wttr.in/Paris\n```", Markdown: []string{wire.MarkdownCode}},
		pipeline.Sentence{Sequence: 3, Text: "Take your **sunglasses**.", Markdown: []string{wire.MarkdownEmphasis}},
	)
	turn.finish()
	eng := &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return turn }}
	st := newStage(t, base, eng, room, out, func(c *voice.Config) { c.Recognizer = rec })
	in := st.Listen("alice", "TR_alice")
	speech := speechtest.Render(t, question, 140, voice.InputRate)
	feed(in, append(append(speechtest.Silence(500, voice.InputRate), speech...), speechtest.Silence(1500, voice.InputRate)...))

	s := wait(t, eng.started, "turn")
	var interims int
	for tr := range room.transcripts {
		if tr.Speaker != "alice" || tr.TrackID != "TR_alice" || tr.ID != s.id {
			t.Fatalf("transcript %+v for turn %+v", tr, s)
		}
		if tr.Final {
			if tr.Text != s.text {
				t.Fatalf("final %q, turn %q", tr.Text, s.text)
			}
			break
		}
		interims++
	}
	wer := speechtest.WER(question, s.text)
	t.Logf("final %q after %d interims, WER %.2f", s.text, interims, wer)
	if interims == 0 || wer > 0.2 || s.speaker != "alice" || !strings.HasPrefix(s.id, "msg") {
		t.Fatalf("turn %+v, %d interims", s, interims)
	}
	first := wait(t, room.speech, "the first words")
	text, parts := transcript(t, room, first)
	if text != "It is sunny in Paris. Take your sunglasses." || parts < 3 || first.SegmentID != voice.AnswerSegment(s.id) || first.TrackID != "TR_bot" {
		t.Fatalf("the agent's transcript %q in %d parts, first %+v", text, parts, first)
	}
	if n := synth.Load(); n != 2 {
		t.Fatalf("%d synthesis requests; want 2 (the code block is skipped)", n)
	}
	for st.State(context.Background()) != voice.StateListening {
		// Playout takes its (accelerated) real time; State is a barrier.
		time.Sleep(20 * time.Millisecond)
	}
	room.mu.Lock()
	states := append([]voice.State(nil), room.states...)
	room.mu.Unlock()
	if want := []voice.State{voice.StateListening, voice.StateThinking, voice.StateSpeaking, voice.StateListening}; !equal(states, want) {
		t.Fatalf("states %v, want %v", states, want)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Without a participant that plays audio, nothing is synthesised.
func TestStageNoAudioOutput(t *testing.T) {
	base, synth := speechServer(t)
	room := newRoom(false)
	out := &fakeOut{speed: 1}
	turn := newTurn(pipeline.Sentence{Sequence: 1, Text: "It is sunny in Paris."})
	st := newStage(t, base, &fakeEngine{started: make(chan started, 1)}, room, out)
	st.SpeakTurn(turn)
	if got := st.State(context.Background()); got != voice.StateThinking {
		t.Fatalf("state %q", got)
	}
	turn.finish()
	for st.State(context.Background()) != voice.StateListening {
		time.Sleep(10 * time.Millisecond)
	}
	if written, _ := out.stats(); synth.Load() != 0 || written != 0 || len(room.speech) != 0 {
		t.Fatalf("%d synthesis requests, %v written", synth.Load(), written)
	}
}

// A click over the agent's speech does not interrupt it; a real question
// does: the audio is cleared, the generation stopped, and the turn told
// how much was heard.
func TestStageBargeIn(t *testing.T) {
	base, _ := speechServer(t)
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	long := newTurn(
		pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."},
		pipeline.Sentence{Sequence: 2, Text: "Clouds will gather in the afternoon, and there may be a short shower around five."},
	)
	next := newTurn(pipeline.Sentence{Sequence: 1, Text: "About three hundred and eighty thousand kilometres."})
	next.finish()
	eng := &fakeEngine{started: make(chan started, 4), accept: func(text string) *fakeTurn {
		if speechtest.WER(other, text) < 0.5 {
			return next
		}
		return nil
	}}
	st := newStage(t, base, eng, room, out)
	st.SpeakTurn(long)
	wait(t, room.speech, "first sentence")
	in := st.Listen("alice", "TR_alice")

	pcm := append(speechtest.Silence(300, voice.InputRate), speechtest.Click(150, voice.InputRate)...)
	pcm = append(pcm, speechtest.Silence(2500, voice.InputRate)...)
	feed(in, pcm)
	// The stage is ordered: its state is read after it took the click.
	if got := st.State(context.Background()); got != voice.StateSpeaking || len(long.interrupts) != 0 {
		t.Fatalf("after a click: state %q, %d interrupts", got, len(long.interrupts))
	}
	if _, clears := out.stats(); clears != 0 {
		t.Fatalf("after a click: %d clears", clears)
	}

	// Talk over it once a few words were heard.
	for said := ""; len(strings.Fields(said)) < 4; {
		said += wait(t, room.speech, "the agent's words").Text
	}
	feed(in, append(speechtest.Render(t, other, 140, voice.InputRate), speechtest.Silence(1000, voice.InputRate)...))
	got := wait(t, long.interrupts, "barge-in")
	if _, clears := out.stats(); got.kind != wire.StopAll || got.heard == nil || clears != 1 {
		t.Fatalf("interrupt %+v, %d clears", got, clears)
	}
	h := got.heard
	t.Logf("heard %v of %v: %q", h.Played, h.Total, h.Text)
	whole := "The weather in Paris is mild today, with a light breeze from the west. Clouds will gather in the afternoon, and there may be a short shower around five."
	if h.Played <= 0 || h.Played >= h.Total || h.Text == "" || !strings.HasPrefix(whole, h.Text) || len(h.Text) >= len(whole) {
		t.Fatalf("heard %+v", h)
	}
	if s := wait(t, eng.started, "the question"); speechtest.WER(other, s.text) > 0.2 {
		t.Fatalf("turn %q", s.text)
	}

	// The answer talked over reports its one barge-in (the click, not
	// speech, did not pause it); the next, spoken whole, its voice stages.
	r := wait(t, long.reports, "the report of the answer talked over")
	if bargeIns := stageCount(r.stages)[voice.StageBargeIn]; !r.interrupted || bargeIns != 1 {
		t.Fatalf("the answer talked over reported %+v", r)
	}
	r = wait(t, next.reports, "the next answer's report")
	want := map[string]int{voice.StageEndpointing: 1, voice.StageRecognition: 1, voice.StageSynthesisFirstByte: 1,
		voice.StageFirstAudio: 1, voice.StageFirstAnswerAudio: 1, voice.StageOwn: 1}
	if got := stageCount(r.stages); r.interrupted || !maps.Equal(got, want) {
		t.Fatalf("the next answer reported stages %v (interrupted %v); want %v", got, r.interrupted, want)
	}
}

// stageCount counts stages by name, and fails on one that ends before
// it starts.
func stageCount(stages []pipeline.Timed) map[string]int {
	n := map[string]int{}
	for _, s := range stages {
		if s.End.Before(s.Start) {
			panic(fmt.Sprintf("stage %s ends before it starts", s.Name))
		}
		n[s.Name]++
	}
	return n
}

// ControlStop: speech stops the audio and keeps the generation,
// generation stops the model and lets the answer so far be spoken, all
// does both; each returns once done.
func TestStageStop(t *testing.T) {
	base, _ := speechServer(t)
	long := pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."}
	for _, tc := range []struct {
		kind          wire.StopType
		clears        int
		stopsModel    bool
		heardReported bool
	}{
		{wire.StopSpeech, 1, false, true},
		{wire.StopGeneration, 0, true, false},
		{wire.StopAll, 1, true, true},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			room := newRoom(true)
			out := &fakeOut{speed: 1}
			turn := newTurn(long)
			st := newStage(t, base, &fakeEngine{started: make(chan started, 1)}, room, out)
			st.SpeakTurn(turn)
			wait(t, room.speech, "the first sentence")
			if !st.Stop(context.Background(), tc.kind) {
				t.Fatal("Stop did not run")
			}
			got := wait(t, turn.interrupts, "the interrupt")
			_, clears := out.stats()
			select {
			case <-turn.done:
				if !tc.stopsModel {
					t.Fatal("the generation stopped")
				}
			default:
				if tc.stopsModel {
					t.Fatal("the generation goes on")
				}
			}
			if got.kind != tc.kind || clears != tc.clears || (got.heard != nil) != tc.heardReported {
				t.Fatalf("interrupt %+v, %d clears", got, clears)
			}
			want := voice.StateSpeaking
			if tc.kind != wire.StopGeneration {
				want = voice.StateListening
			}
			if s := st.State(context.Background()); s != want {
				t.Fatalf("state %q, want %q", s, want)
			}
		})
	}
}

// A stop of speech the engine received from a client (the turn hushed)
// clears the audio at once and reports what was heard, without stopping
// the model.
func TestStageHushedByTheEngine(t *testing.T) {
	base, _ := speechServer(t)
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	turn := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."})
	st := newStage(t, base, &fakeEngine{started: make(chan started, 1)}, room, out)
	st.SpeakTurn(turn)
	wait(t, room.speech, "the first sentence")
	close(turn.hushed)
	for st.State(context.Background()) != voice.StateListening {
		time.Sleep(10 * time.Millisecond)
	}
	turn.mu.Lock()
	h := turn.heard
	turn.mu.Unlock()
	if _, clears := out.stats(); clears != 1 || h == nil || h.Total == 0 || len(turn.interrupts) != 0 {
		t.Fatalf("%d clears, heard %+v, %d interrupts", clears, h, len(turn.interrupts))
	}
	select {
	case <-turn.done:
		t.Fatal("the generation stopped")
	default:
	}
}

// heldRecognizer is a recogniser that takes as long as the test says:
// each request waits for a release, then answers text.
type heldRecognizer struct {
	text     string
	release  chan struct{}
	requests chan struct{}
}

func (r *heldRecognizer) Stream(ctx context.Context, _ *speech.RecognizeRequest) iter.Seq[speech.RecognizeEvent] {
	return func(yield func(speech.RecognizeEvent) bool) {
		r.requests <- struct{}{}
		select {
		case <-r.release:
			yield(speech.RecognizeEvent{Kind: speech.RecognizeFinal, Text: r.text})
		case <-ctx.Done():
			yield(speech.RecognizeEvent{Kind: speech.RecognizeError, Err: ctx.Err()})
		}
	}
}

// Listening never waits on recognition: while the final recognition of a
// short utterance is still out, the same speaker talking over the agent
// interrupts it, and the utterance is still answered once recognised.
// Listen itself never waits for the stage, so an SDK callback may call
// it before the stage runs.
func TestListeningDoesNotWaitForRecognition(t *testing.T) {
	base, _ := speechServer(t)
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	rec := &heldRecognizer{text: "yes", release: make(chan struct{}), requests: make(chan struct{}, 8)}
	long := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."})
	next := newTurn(pipeline.Sentence{Sequence: 1, Text: "Good."})
	next.finish()
	eng := &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return next }}
	st := voice.New(voice.Config{
		Recognizer:   rec,
		Synthesizer:  &speech.OpenAISynthesizer{URL: base, Model: "tts-1"},
		InterimEvery: -1,
		EchoWarmup:   -1,
		// No word can come while the recogniser is held: the question
		// stops the agent by its length.
		MinInterruption: 500 * time.Millisecond,
		Logger:          slog.New(slog.DiscardHandler),
	}, eng, room, out)
	eng.stage = st
	in := st.Listen("alice", "TR_alice") // before Run: it must not wait for it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); st.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	st.SpeakTurn(long)
	wait(t, room.speech, "the first sentence")

	feed(in, append(speechtest.Render(t, "Yes.", 140, voice.InputRate), speechtest.Silence(600, voice.InputRate)...))
	wait(t, rec.requests, "the short utterance's recognition")
	feed(in, append(speechtest.Render(t, other, 140, voice.InputRate), speechtest.Silence(600, voice.InputRate)...))
	if got := wait(t, long.interrupts, "barge-in while the recogniser is busy"); got.kind != wire.StopAll {
		t.Fatalf("interrupt %+v", got)
	}
	if len(eng.started) != 0 {
		t.Fatal("a turn started before its utterance was recognised")
	}
	close(rec.release)
	if s := wait(t, eng.started, "the short utterance's turn"); s.text != "yes" || s.speaker != "alice" {
		t.Fatalf("turn %+v", s)
	}
	wait(t, eng.started, "the second utterance's turn")
}

// scriptedRecognizer answers every request with text: what a real
// recogniser makes of a cough or a hum varies, and these tests are about
// what the stage does with each answer.
type scriptedRecognizer struct{ text string }

func (r scriptedRecognizer) Stream(context.Context, *speech.RecognizeRequest) iter.Seq[speech.RecognizeEvent] {
	return func(yield func(speech.RecognizeEvent) bool) {
		yield(speech.RecognizeEvent{Kind: speech.RecognizeFinal, Text: r.text})
	}
}

// observed counts what the stage reports to its Observer.
type observed struct {
	interrupted, falseInterruptions, unrecognised, noise, echo atomic.Int32
}

func (o *observed) Interrupted()       { o.interrupted.Add(1) }
func (o *observed) FalseInterruption() { o.falseInterruptions.Add(1) }
func (o *observed) Unrecognised()      { o.unrecognised.Add(1) }
func (o *observed) NoiseIgnored()      { o.noise.Add(1) }
func (o *observed) EchoRejected()      { o.echo.Add(1) }

// A hum ("mm-hm") over the agent pauses its audio at the onset, and
// noise as long as a whisper pauses it too; it resumes once the
// utterance proves to hold no word: nothing is cleared or repeated, the
// generation goes on, no turn starts, and the whole answer is spoken.
func TestStageFalseInterruptionResumes(t *testing.T) {
	base, _ := speechServer(t)
	for _, tc := range []struct {
		name, heard string
		sound       []int16
	}{
		{"hum", "mm-hmm", speechtest.Hum(400, voice.InputRate)},
		{"long noise", "", speechtest.Click(700, voice.InputRate)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room := newRoom(true)
			out := &fakeOut{speed: 1}
			obs := &observed{}
			turn := newTurn(
				pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."},
				pipeline.Sentence{Sequence: 2, Text: "Take a coat."},
			)
			turn.finish()
			eng := &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return nil }}
			st := newStage(t, base, eng, room, out, func(c *voice.Config) {
				c.Recognizer, c.Observer = scriptedRecognizer{tc.heard}, obs
			})
			in := st.Listen("alice", "TR_alice")
			st.SpeakTurn(turn)
			wait(t, room.speech, "the first sentence")
			feed(in, append(append(speechtest.Silence(200, voice.InputRate), tc.sound...), speechtest.Silence(800, voice.InputRate)...))
			for obs.falseInterruptions.Load() == 0 {
				if got := st.State(context.Background()); got != voice.StateSpeaking {
					t.Fatalf("the agent is %s", got)
				}
				time.Sleep(20 * time.Millisecond)
			}
			rest, _ := transcript(t, room, voice.AgentSpeech{})
			out.mu.Lock()
			pauses, resumes, clears := out.pauses, out.resumes, out.clears
			out.mu.Unlock()
			if pauses != 1 || resumes != 1 || clears != 0 || len(turn.interrupts) != 0 || len(eng.started) != 0 ||
				!strings.HasSuffix(rest, "Take a coat.") || obs.interrupted.Load() != 0 || obs.noise.Load() != 0 {
				t.Fatalf("%d pauses, %d resumes, %d clears, %d interrupts, %d turns, %d noises ignored, then spoke %q",
					pauses, resumes, clears, len(turn.interrupts), len(eng.started), obs.noise.Load(), rest)
			}
		})
	}
}

// While the agent's first speech may still come back through a client
// whose echo canceller has not settled, sound over it neither pauses nor
// stops it, however long; words still do.
func TestStageEchoWarmup(t *testing.T) {
	base, _ := speechServer(t)
	for _, tc := range []struct {
		heard       string
		interrupted bool
	}{{"", false}, {"stop please", true}} {
		t.Run(fmt.Sprint(tc.interrupted), func(t *testing.T) {
			room := newRoom(true)
			out := &fakeOut{speed: 1}
			obs := &observed{}
			turn := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."})
			eng := &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return nil }}
			st := newStage(t, base, eng, room, out, func(c *voice.Config) {
				c.Recognizer, c.Observer, c.EchoWarmup, c.InterimEvery = scriptedRecognizer{tc.heard}, obs, time.Minute, -1
			})
			in := st.Listen("alice", "TR_alice")
			st.SpeakTurn(turn)
			wait(t, room.speech, "the first sentence")
			feed(in, append(speechtest.Hum(900, voice.InputRate), speechtest.Silence(800, voice.InputRate)...))
			if tc.interrupted {
				if got := wait(t, turn.interrupts, "the interruption"); got.kind != wire.StopAll {
					t.Fatalf("interrupt %+v", got)
				}
				wait(t, eng.started, "the turn")
				return
			}
			for obs.unrecognised.Load() == 0 {
				time.Sleep(20 * time.Millisecond)
			}
			out.mu.Lock()
			pauses, clears := out.pauses, out.clears
			out.mu.Unlock()
			if st.State(context.Background()) != voice.StateSpeaking || pauses != 0 || clears != 0 || len(turn.interrupts) != 0 || obs.interrupted.Load() != 0 {
				t.Fatalf("during the warm-up: %d pauses, %d clears, %d interrupts", pauses, clears, len(turn.interrupts))
			}
		})
	}
}

// toneSynth speaks every sentence as 600 ms of tone at 16 kHz, a rate
// the cue never uses, so that a recording tells the two apart.
type toneSynth struct{}

func (toneSynth) Stream(context.Context, *speech.SynthesizeRequest) iter.Seq[speech.SynthesizeEvent] {
	return func(yield func(speech.SynthesizeEvent) bool) {
		pcm := make([]int16, 16000*6/10)
		for i := range pcm {
			pcm[i] = int16(3000 * math.Sin(2*math.Pi*220*float64(i)/16000))
		}
		yield(speech.SynthesizeEvent{Kind: speech.SynthesizeAudio, Samples: pcm, SampleRate: 16000})
	}
}

// recordedOut notes every write's rate and when it came.
type recordedOut struct {
	*fakeOut
	mu     sync.Mutex
	writes []recordedWrite
}

type recordedWrite struct {
	at   time.Time
	rate int
	n    int
}

func (o *recordedOut) Write(s []int16, rate int) error {
	o.mu.Lock()
	o.writes = append(o.writes, recordedWrite{time.Now(), rate, len(s)})
	o.mu.Unlock()
	return o.fakeOut.Write(s, rate)
}

// Clear is recorded as a write of rate 0.
func (o *recordedOut) Clear() {
	o.mu.Lock()
	o.writes = append(o.writes, recordedWrite{at: time.Now()})
	o.mu.Unlock()
	o.fakeOut.Clear()
}

func (o *recordedOut) recorded() []recordedWrite {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]recordedWrite(nil), o.writes...)
}

// While the model thinks past CueAfter with nothing audible, the cue
// plays; the answer's first audio ends it with a short fade queued before
// the answer, and no cue is written after. A client that asked for no
// cue hears none.
func TestStageThinkingCue(t *testing.T) {
	for _, mode := range []voice.CueMode{"", voice.CueOff} {
		t.Run(string(mode), func(t *testing.T) {
			room := newRoom(true)
			room.cue = mode
			out := &recordedOut{fakeOut: &fakeOut{speed: 1}}
			turn := newTurn()
			st := newStage(t, "", &fakeEngine{started: make(chan started, 1)}, room, out, func(c *voice.Config) {
				c.Synthesizer, c.CueAfter = toneSynth{}, 100*time.Millisecond
			})
			start := time.Now()
			st.SpeakTurn(turn)
			if mode == voice.CueOff {
				// Ordered: the stage took the turn before this state.
				if st.State(context.Background()) != voice.StateThinking {
					t.Fatal("not thinking")
				}
			} else {
				for len(out.recorded()) < 10 {
					time.Sleep(20 * time.Millisecond)
				}
				if st.State(context.Background()) != voice.StateThinking {
					t.Fatal("the cue changed the agent's state")
				}
			}
			turn.sentences <- pipeline.Sentence{Sequence: 1, Text: "Here is the answer."}
			turn.finish()
			wait(t, room.speech, "the sentence")
			ws := out.recorded()
			answer := slices.IndexFunc(ws, func(w recordedWrite) bool { return w.rate == 16000 })
			if answer < 0 || slices.ContainsFunc(ws[answer:], func(w recordedWrite) bool { return w.rate != 16000 }) {
				t.Fatalf("writes %+v", ws)
			}
			if mode == voice.CueOff {
				if answer != 0 {
					t.Fatalf("%d cue writes though the client asked for none", answer)
				}
				return
			}
			if answer < 2 {
				t.Fatalf("%d cue writes before the answer", answer)
			}
			t.Logf("cue from %v after the turn began, %d writes, answer after %v", ws[0].at.Sub(start).Round(time.Millisecond), answer, ws[answer].at.Sub(start).Round(time.Millisecond))
		})
	}
}

// Talk over the cue stops it like an answer: the queue is cleared and no
// cue follows.
func TestStageBargeInDuringTheCue(t *testing.T) {
	room := newRoom(true)
	out := &recordedOut{fakeOut: &fakeOut{speed: 1}}
	turn := newTurn()
	eng := &fakeEngine{started: make(chan started, 1), accept: func(string) *fakeTurn { return nil }}
	st := voice.New(voice.Config{Synthesizer: toneSynth{}, Recognizer: scriptedRecognizer{"wait a second"}, CueAfter: 50 * time.Millisecond,
		EchoWarmup: -1, Logger: slog.New(slog.DiscardHandler)}, eng, room, out)
	eng.stage = st
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); st.Run(ctx) }()
	defer func() { cancel(); <-done }()
	in := st.Listen("alice", "TR_alice")
	st.SpeakTurn(turn)
	for len(out.recorded()) < 5 {
		time.Sleep(20 * time.Millisecond)
	}
	feed(in, append(speechtest.Hum(900, voice.InputRate), speechtest.Silence(700, voice.InputRate)...))
	if got := wait(t, turn.interrupts, "the interruption"); got.kind != wire.StopAll {
		t.Fatalf("interrupt %+v", got)
	}
	wait(t, eng.started, "the new question")
	// Run returns once every goroutine it started is done: after it, no
	// cue can be written any more.
	cancel()
	<-done
	ws := out.recorded()
	cleared := slices.IndexFunc(ws, func(w recordedWrite) bool { return w.rate == 0 })
	if cleared < 0 || slices.ContainsFunc(ws[cleared+1:], func(w recordedWrite) bool { return w.rate != 0 }) {
		t.Fatalf("writes %+v", ws)
	}
}

// transcript reads the agent's transcript from first to its final part:
// the text and how many parts it came in.
func transcript(t testing.TB, room *fakeRoom, first voice.AgentSpeech) (string, int) {
	t.Helper()
	text, parts := first.Text, 1
	for sp := first; !sp.Final; parts++ {
		if sp.Cut {
			t.Fatalf("the transcript was cut after %q", text)
		}
		sp = wait(t, room.speech, "the rest of the agent's transcript")
		text += sp.Text
	}
	return text, parts
}

// A speaker who adds to the question while its answer is still being
// thought asks the whole question again under the same message: the
// thinking turn is stopped, and no second question is asked apart.
func TestStageFollowUpWhileThinking(t *testing.T) {
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
	in := st.Listen("alice", "TR_alice")
	feed(in, append(speechtest.Render(t, question, 140, voice.InputRate), speechtest.Silence(800, voice.InputRate)...))
	first := wait(t, eng.started, "the question")
	feed(in, append(speechtest.Render(t, other, 140, voice.InputRate), speechtest.Silence(800, voice.InputRate)...))
	if got := wait(t, thinking.interrupts, "the thinking turn stopped"); got.kind != wire.StopAll {
		t.Fatalf("interrupt %+v", got)
	}
	second := wait(t, eng.started, "the whole question")
	t.Logf("asked %q, then %q", first.text, second.text)
	if second.id != first.id || !strings.HasPrefix(second.text, first.text+" ") || speechtest.WER(question+" "+other, second.text) > 0.2 {
		t.Fatalf("first %+v, then %+v", first, second)
	}
	// The stage is ordered: its state follows the second turn's start.
	st.State(context.Background())
	if len(eng.started) != 0 {
		t.Fatalf("%d more turns", len(eng.started))
	}
	// A final transcript is a turn: the utterance that only added to the
	// question has none of its own (its transcripts went out before the
	// question was asked again).
	for len(room.transcripts) > 0 {
		if tr := <-room.transcripts; tr.Final && (tr.ID != first.id || tr.Text == "") {
			t.Fatalf("final transcript %+v; the only final one is the whole question's, %s", tr, first.id)
		}
	}
}

// An answer whose speech was stopped while its model goes on (a
// client's ControlStop of speech; another speaker's barge-in until the
// stopped generation ends) was heard in part: the asker's next utterance
// is a question of its own, not an addition to the one answered.
func TestStageQuestionAfterTheAnswerWasHeard(t *testing.T) {
	base, _ := speechServer(t)
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	answering := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."})
	next := newTurn(pipeline.Sentence{Sequence: 1, Text: "Good."})
	next.finish()
	eng := &fakeEngine{started: make(chan started, 4), accept: func(text string) *fakeTurn {
		if strings.Contains(text, "moon") {
			return next
		}
		return answering
	}}
	st := newStage(t, base, eng, room, out, func(c *voice.Config) { c.CueAfter = time.Minute })
	in := st.Listen("alice", "TR_alice")
	feed(in, append(speechtest.Render(t, question, 140, voice.InputRate), speechtest.Silence(800, voice.InputRate)...))
	first := wait(t, eng.started, "the question")
	wait(t, room.speech, "the answer's first words")
	if !st.Stop(context.Background(), wire.StopSpeech) {
		t.Fatal("the stage ended")
	}
	feed(in, append(speechtest.Render(t, other, 140, voice.InputRate), speechtest.Silence(800, voice.InputRate)...))
	second := wait(t, eng.started, "the next question")
	if second.id == first.id || speechtest.WER(other, second.text) > 0.2 {
		t.Fatalf("asked %+v, then %+v: want a question of its own", first, second)
	}
}

// phraseSynth answers each text with silence of a length of its own
// (each of the cue's phrases differs), so that a recording tells which
// phrase played; it counts its requests.
type phraseSynth struct {
	mu       sync.Mutex
	requests []string
}

func (s *phraseSynth) Stream(_ context.Context, req *speech.SynthesizeRequest) iter.Seq[speech.SynthesizeEvent] {
	s.mu.Lock()
	s.requests = append(s.requests, req.Text)
	s.mu.Unlock()
	return func(yield func(speech.SynthesizeEvent) bool) {
		yield(speech.SynthesizeEvent{Kind: speech.SynthesizeAudio, Samples: make([]int16, 80*(len(req.Text)+int(req.Text[0]))), SampleRate: 8000})
	}
}

// The phrase cue is synthesised once per voice, whichever conversation
// asks first, and two turns in a row never say the same one.
func TestStagePhraseCue(t *testing.T) {
	syn := &phraseSynth{}
	room := newRoom(true)
	room.cue = voice.CuePhrase
	out := &recordedOut{fakeOut: &fakeOut{speed: 1}}
	st := newStage(t, "", &fakeEngine{started: make(chan started, 1)}, room, out, func(c *voice.Config) {
		c.Synthesizer, c.CueAfter, c.Voice = syn, 10*time.Millisecond, fmt.Sprint("voice-", time.Now().UnixNano()) // the cache is the process's
	})
	var said []int
	for range 2 {
		turn := newTurn()
		start := len(out.recorded())
		st.SpeakTurn(turn)
		// The phrase has played once its writes stop: the turn then ends.
		for {
			ws := out.recorded()[start:]
			if len(ws) > 0 && out.fakeOut.Queued() == 0 {
				n := 0
				for _, w := range ws {
					n += w.n
				}
				said = append(said, n)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		turn.finish()
		for st.State(context.Background()) != voice.StateListening {
			time.Sleep(10 * time.Millisecond)
		}
	}
	syn.mu.Lock()
	requests := len(syn.requests)
	syn.mu.Unlock()
	if requests != 4 || said[0] == said[1] {
		t.Fatalf("%d synthesis requests; phrases of %v samples", requests, said)
	}
}

// Talk over the agent whose transcript does not come back in time still
// resumes it, FalseInterruption after the speech ended; a late empty
// transcript then changes nothing.
func TestStageFalseInterruptionTimesOut(t *testing.T) {
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	obs := &observed{}
	rec := &heldRecognizer{release: make(chan struct{}), requests: make(chan struct{}, 4)}
	turn := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west."})
	st := newStage(t, "", &fakeEngine{started: make(chan started, 1), accept: func(string) *fakeTurn { return nil }}, room, out, func(c *voice.Config) {
		c.Recognizer, c.Synthesizer, c.Observer, c.FalseInterruption, c.InterimEvery = rec, toneSynth{}, obs, 200*time.Millisecond, -1
	})
	in := st.Listen("alice", "TR_alice")
	st.SpeakTurn(turn)
	wait(t, room.speech, "the first words")
	feed(in, append(speechtest.Hum(300, voice.InputRate), speechtest.Silence(700, voice.InputRate)...))
	wait(t, rec.requests, "the recognition, held")
	for obs.falseInterruptions.Load() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	close(rec.release)
	// The stage is ordered: its state is read after it took the late
	// transcript.
	for obs.unrecognised.Load() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	out.mu.Lock()
	pauses, resumes, clears := out.pauses, out.resumes, out.clears
	out.mu.Unlock()
	if st.State(context.Background()) != voice.StateSpeaking || pauses != 1 || resumes != 1 || clears != 0 || len(turn.interrupts) != 0 || obs.falseInterruptions.Load() != 1 {
		t.Fatalf("%d pauses, %d resumes, %d clears, %d interrupts, %d false interruptions", pauses, resumes, clears, len(turn.interrupts), obs.falseInterruptions.Load())
	}
}

// aheadOut is a fakeOut that remembers how far ahead of the listener the
// audio written to it ever was, and its largest write.
type aheadOut struct {
	fakeOut
	maxAhead, maxChunk time.Duration
}

func (o *aheadOut) Write(s []int16, rate int) error {
	if err := o.fakeOut.Write(s, rate); err != nil {
		return err
	}
	ahead := o.Queued()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.maxAhead = max(o.maxAhead, ahead)
	o.maxChunk = max(o.maxChunk, time.Duration(len(s))*time.Second/time.Duration(rate))
	return nil
}

// Synthesis keeps at most PlayAhead ahead of the listener, not a whole
// answer queued at once, and the whole answer is still spoken.
func TestStageSynthesisKeepsPace(t *testing.T) {
	base, synth := speechServer(t)
	room := newRoom(true)
	// Played at eight times real time, so that a long answer takes a few
	// seconds; the stand-in synthesises far faster still.
	out := &aheadOut{fakeOut: fakeOut{speed: 8}}
	var sentences []pipeline.Sentence
	for i := range 5 {
		sentences = append(sentences, pipeline.Sentence{Sequence: int32(i + 1), Text: "The moon is about three hundred and eighty thousand kilometres away from the earth."})
	}
	turn := newTurn(sentences...)
	turn.finish()
	eng := &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return turn }}
	st := newStage(t, base, eng, room, out)
	in := st.Listen("alice", "TR_alice")
	feed(in, append(append(speechtest.Silence(500, voice.InputRate), speechtest.Render(t, question, 140, voice.InputRate)...), speechtest.Silence(1500, voice.InputRate)...))
	wait(t, eng.started, "turn")
	// The transcript is final once the whole answer has played.
	text, _ := transcript(t, room, wait(t, room.speech, "the first words"))
	if want := strings.Repeat(sentences[0].Text+" ", len(sentences)); text != want[:len(want)-1] {
		t.Fatalf("the agent's transcript %q", text)
	}
	out.mu.Lock()
	written, maxAhead, maxChunk := out.written, out.maxAhead, out.maxChunk
	out.mu.Unlock()
	t.Logf("%v of audio in %d syntheses; at most %v ahead of the listener (writes up to %v)", written, synth.Load(), maxAhead, maxChunk)
	if n := synth.Load(); n != int32(len(sentences)) {
		t.Fatalf("%d of %d sentences synthesised", n, len(sentences))
	}
	if written < 3*voice.PlayAhead {
		t.Fatalf("only %v of audio: too short an answer to show the pace", written)
	}
	if maxAhead > voice.PlayAhead+maxChunk {
		t.Fatalf("%v queued ahead of the listener, more than %v and a write of %v", maxAhead, voice.PlayAhead, maxChunk)
	}
}
