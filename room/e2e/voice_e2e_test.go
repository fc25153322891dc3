package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/protocol/livekit"
	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/speech"
	speechstandin "github.com/alicia-voice/alicia/speech/standin"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// pcmQueue collects the bot's decoded voice, and when it last carried
// speech.
type pcmQueue struct {
	mu       sync.Mutex
	ch       chan []int16
	closed   bool
	lastLoud time.Time
}

func (q *pcmQueue) WriteSample(p media.PCM16Sample) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if speechtest.RMS(p) > 300 {
		q.lastLoud = time.Now()
	}
	if !q.closed {
		select {
		case q.ch <- append([]int16(nil), p...):
		default:
		}
	}
	return nil
}

func (q *pcmQueue) loudAt() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lastLoud
}

func (q *pcmQueue) Close() error { q.mu.Lock(); q.closed = true; q.mu.Unlock(); return nil }

// speak writes pcm to the microphone at real-time pace, as a microphone
// does, and returns when the last of it has been sent; PCMLocalTrack
// drops what is written before its track is bound, which the leading
// silence covers. The track sends a frame every 20 ms on its own clock,
// and silence when it has none: a few frames are kept queued ahead of it,
// so that this goroutine waking late on a loaded machine does not put a
// gap of silence inside the speech, which no microphone does.
func speak(ctx context.Context, mic *lkmedia.PCMLocalTrack, pcm []int16) {
	const frame, ahead = 320, 5 // 20 ms at 16 kHz; 100 ms queued
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	frames := (len(pcm) + frame - 1) / frame
	for written := 0; ; {
		due := int(time.Since(start)/(20*time.Millisecond)) + 1
		for ; written < min(due+ahead, frames); written++ {
			_ = mic.WriteSample(pcm[written*frame : min((written+1)*frame, len(pcm))])
		}
		if due >= frames {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// A spoken question over a real livekit-server is answered by the real
// engine exactly as a typed one: interim and final Transcriptions (the
// final one's id is the user message's), reasoning steps, StartAnswer and
// sentences, storage; the answer is spoken (and only the answer: every
// synthesised text is a sentence of it), its first sentence heard on the
// bot's track; talking over it stops it, and the stored answer says how
// much was heard.
func TestVoiceTurnThroughTheEngine(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	question, interruption := "How far is the moon?", "What is the weather like in Paris today?"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, store, speechURL, synthesisedTexts := voiceAgent(t, lk, question, interruption, "you said")
	const conv = "conv_voice_engine"
	heard := &pcmQueue{ch: make(chan []int16, 8192)}
	u, mic, micPub := listeningUser(t, lk, cfg, conv, "alice", heard)
	// The SDK merges a stream's trailer attributes into the map its
	// handler was given, from another goroutine: they are read once the
	// stream is complete.
	type textStream struct {
		attrs map[string]string
		text  string
	}
	userStreams := make(chan textStream, 64)
	if err := u.room.RegisterTextStreamHandler(room.TranscriptionTopic, func(r *lksdk.TextStreamReader, _ string) {
		text := r.ReadAll()
		userStreams <- textStream{maps.Clone(r.Info.Attributes), text}
	}); err != nil {
		t.Fatal(err)
	}
	spoken := append(append(speechtest.Silence(2000, voice.InputRate), speechtest.Render(t, question, 140, voice.InputRate)...), speechtest.Silence(1000, voice.InputRate)...)
	speak(ctx, mic, spoken)

	got := u.until("the final sentence", finalSentence)
	var interim []*wire.Transcription
	var final *wire.Transcription
	var steps []*wire.ReasoningStep
	var start *wire.StartAnswer
	var sentences []*wire.AssistantSentence
	for _, e := range got {
		switch b := e.Body.(type) {
		case *wire.Transcription:
			if b.Final {
				final = b
			} else {
				interim = append(interim, b)
			}
		case *wire.ReasoningStep:
			steps = append(steps, b)
		case *wire.StartAnswer:
			start = b
		case *wire.AssistantSentence:
			sentences = append(sentences, b)
		case *wire.UserMessage, *wire.Acknowledgement:
			t.Fatalf("a typed turn's %T for a spoken one", b)
		}
	}
	if final == nil || start == nil {
		t.Fatalf("final %+v, start %+v", final, start)
	}
	wer := speechtest.WER(question, final.Text)
	t.Logf("final Transcription %q (WER %.2f) after %d interim; %d steps, %d sentences", final.Text, wer, len(interim), len(steps), len(sentences))
	if wer > 0.2 || len(interim) == 0 || interim[0].ID != final.ID || start.PreviousID != final.ID || len(steps) != 3 || steps[0].PreviousID != final.ID || len(sentences) < 2 {
		t.Fatalf("interim %d, final %+v, start %+v, %d steps", len(interim), final, start, len(steps))
	}
	if !strings.Contains(sentences[0].Text, final.Text) {
		t.Fatalf("the answer %q does not follow the transcript %q", sentences[0].Text, final.Text)
	}
	// The user's own words reached the user's client on lk.transcription,
	// on the user's microphone track, final last.
	for sawFinal := false; !sawFinal; {
		var r textStream
		select {
		case r = <-userStreams:
		case <-time.After(30 * time.Second):
			t.Fatal("no final user transcript stream")
		}
		if r.attrs[room.AttrSegmentID] != voice.UserSegment(final.ID) {
			continue // the agent's speech
		}
		if r.attrs[room.AttrTranscribedTrack] != micPub.SID() {
			t.Fatalf("transcript on track %q, want %q", r.attrs[room.AttrTranscribedTrack], micPub.SID())
		}
		sawFinal = r.attrs[room.AttrTranscriptFinal] == "true" && r.text == final.Text
	}

	// The first sentence of the answer is heard on the bot's track:
	// espeak-ng pauses at its colon, so it is the first two stretches of
	// speech. The thinking cue, which a slow model lets play first, is
	// not speech (in CI it once made the first stretch).
	e, _ := voice.NewEndpointer(voice.EndpointConfig{Silence: 300 * time.Millisecond})
	var fr voice.Framer
	var first []int16
	for parts := 0; parts < 2; {
		var pcm []int16
		select {
		case pcm = <-heard.ch:
		case <-time.After(30 * time.Second):
			t.Fatal("no voice from the bot")
		}
		if measureFrame(pcm, time.Time{}).cue() {
			continue
		}
		for _, f := range fr.Write(pcm) {
			evs, _ := e.Push(f)
			for _, ev := range evs {
				if ev.Kind == voice.SpeechEnded && parts < 2 {
					first = append(first, ev.Audio...)
					parts++
				}
			}
		}
	}
	var said string
	recog := &speech.OpenAIRecognizer{URL: speechURL + "/v1"}
	for ev := range recog.Stream(ctx, &speech.RecognizeRequest{Audio: first, SampleRate: voice.InputRate}) {
		if ev.Kind == speech.RecognizeError {
			t.Fatal(ev.Err)
		}
		said = ev.Text
	}
	t.Logf("the bot's track said %q; the first sentence is %q", said, sentences[0].Text)
	if speechtest.WER("you said "+final.Text, said) > 0.2 {
		t.Fatalf("heard %q", said)
	}

	// The bot says it speaks, as LiveKit's client components read it (the
	// worker's token lets it set its own attributes).
	state := ""
	for _, p := range u.room.GetRemoteParticipants() {
		if p.Kind() == lksdk.ParticipantAgent {
			state = p.Attributes()[room.AgentStateAttribute]
		}
	}
	if state != string(voice.StateSpeaking) {
		t.Fatalf("lk.agent.state %q while the answer plays", state)
	}

	// A 150 ms click over the answer does not stop it.
	clickAt := time.Now()
	speak(ctx, mic, append(speechtest.Click(150, voice.InputRate), speechtest.Silence(700, voice.InputRate)...))
	for heard.loudAt().Before(clickAt.Add(1500 * time.Millisecond)) {
		if time.Since(clickAt) > 10*time.Second {
			t.Fatal("the answer stopped after a click")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Talking over it interrupts it; the stored answer says what was heard.
	speak(ctx, mic, append(speechtest.Render(t, interruption, 140, voice.InputRate), speechtest.Silence(1000, voice.InputRate)...))
	deadline := time.Now().Add(30 * time.Second)
	var answer storage.Entry
	for time.Now().Before(deadline) {
		hist, _ := store.History(ctx, conv)
		if len(hist) >= 2 && hist[1].Status == storage.StatusStopped {
			answer = hist[1]
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("stored answer (%s): %q", answer.Status, answer.Content)
	var whole []string
	for _, s := range sentences {
		whole = append(whole, voice.Speakable(pipeline.Sentence{Text: s.Text}))
	}
	if !strings.HasPrefix(answer.Content, "You said: "+final.Text+".") || !strings.HasPrefix(strings.Join(whole, " "), answer.Content) || answer.Content == strings.Join(whole, " ") {
		t.Fatalf("stored %+v, not a part of %q", answer, whole)
	}
	// The agent's transcript stream stopped where the audio did, not
	// final, and says what was stored, to the word or two (it goes out
	// as each word begins, the store keeps the words mostly heard).
	for {
		var r textStream
		select {
		case r = <-userStreams:
		case <-time.After(30 * time.Second):
			t.Fatal("no agent transcript stream for the interrupted answer")
		}
		if r.attrs[room.AttrSegmentID] != voice.AnswerSegment(answer.ID) {
			continue
		}
		shown, kept := strings.Fields(r.text), strings.Fields(answer.Content)
		t.Logf("the agent's transcript %q (final %s)", r.text, r.attrs[room.AttrTranscriptFinal])
		if r.attrs[room.AttrTranscriptFinal] != "false" || len(shown) < len(kept) || len(shown) > len(kept)+2 || !strings.HasPrefix(r.text, answer.Content) {
			t.Fatalf("the agent's transcript %q for the stored %q", r.text, answer.Content)
		}
		break
	}

	// Only answers' sentences were synthesised, never reasoning.
	u.mu.Lock()
	all := append([]*wire.Envelope(nil), u.got...)
	u.mu.Unlock()
	texts := synthesisedTexts()
	for _, text := range texts {
		ok := false
		for _, e := range all {
			switch b := e.Body.(type) {
			case *wire.AssistantSentence:
				ok = ok || voice.Speakable(pipeline.Sentence{Text: b.Text}) == text
			case *wire.ReasoningStep:
				if strings.Contains(text, b.Content) || strings.Contains(b.Content, text) {
					t.Fatalf("synthesised reasoning: %q", text)
				}
			}
		}
		if !ok {
			t.Fatalf("synthesised %q, not a sentence of an answer", text)
		}
	}
	t.Logf("%d sentences synthesised, all from answers", len(texts))
}

// voiceAgent runs the bot with the engine, the Qwen3 stand-in and the
// speech stand-in limited to phrases; synthesised lists the texts sent
// for synthesis so far.
func voiceAgent(t *testing.T, lk *testenv.LiveKit, phrases ...string) (cfg room.Config, store storage.Store, speechURL string, synthesised func() []string) {
	return voiceAgentWith(t, lk, modelSetup{}, phrases...)
}

// modelSetup is what the bot's model does: the stand-in's scenarios (nil:
// its default) at a pace (zero: fast), and how turns think.
type modelSetup struct {
	scenarios []standin.Scenario
	pacing    standin.Pacing
	thinking  *pipeline.ThinkingPolicy
	// stage changes the voice stage's settings; telemetry hears the
	// engine's turns.
	stage     func(*voice.Config)
	telemetry pipeline.TurnObserver
}

func voiceAgentWith(t testing.TB, lk *testenv.LiveKit, ms modelSetup, phrases ...string) (cfg room.Config, store storage.Store, speechURL string, synthesised func() []string) {
	t.Helper()
	if ms.pacing == (standin.Pacing{}) {
		ms.pacing = standin.Pacing{TTFTMs: 5, TokenMs: 1}
	}
	s, _ := standin.New(ms.scenarios, ms.pacing, nil)
	model := httptest.NewServer(s.Handler())
	t.Cleanup(model.Close)
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	testenv.SpeechEngines(t)
	sp, err := speechstandin.New(speechstandin.Config{Phrases: phrases, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	var mu sync.Mutex
	var texts []string
	h := sp.Handler()
	speechSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/audio/speech") {
			body, _ := io.ReadAll(r.Body)
			var req struct{ Input string }
			_ = json.Unmarshal(body, &req)
			mu.Lock()
			texts = append(texts, req.Input)
			mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(speechSrv.Close)

	mem := storage.NewMemory(storage.ReasoningPlain)
	cfg = room.Config{LiveKitURL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, AgentName: "alicia-voice"}
	log := testenv.Log(t)
	engine := pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true, ThinkingPolicy: ms.thinking, Telemetry: ms.telemetry, Logger: log}, mem)
	agent := room.NewAgent(cfg, mem, room.NewMetrics(nil), func(id string) room.Conversation { return engine.Open(id) }, log)
	stage := voice.Config{
		Recognizer:  &speech.OpenAIRecognizer{URL: speechSrv.URL + "/v1", Streaming: true},
		Synthesizer: &speech.OpenAISynthesizer{URL: speechSrv.URL + "/v1", Format: "pcm", PCMRate: speechstandin.PCMRate},
		Logger:      log,
	}
	if ms.stage != nil {
		ms.stage(&stage)
	}
	agent.EnableVoice(room.VoiceConfig{OutputRate: speechstandin.PCMRate, Stage: stage})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); agent.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-agent.Registered()
	return cfg, mem, speechSrv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), texts...)
	}
}

// A typed question from a client without audio_output is answered with
// sentences and nothing is synthesised; the same question from a client
// with it is spoken.
func TestVoiceOnlyForAudioClients(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	cfg, _, _, synthesised := voiceAgent(t, lk)
	bob := join(t, lk, cfg, "conv_voice_text", "bob")
	bob.greeted()
	bob.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
	bob.until("configured", func(g []*wire.Envelope) bool { return has[*wire.Configuration](g) > 1 })
	bob.send(&wire.UserMessage{ID: "msg_text1", ConversationID: "conv_voice_text", Content: "Hello?"})
	got := bob.until("the final sentence", finalSentence)
	if n := has[*wire.AssistantSentence](got); n < 2 {
		t.Fatalf("%d sentences", n)
	}
	// The answer is over and stored before the next turn starts: a second
	// question is the barrier after which no synthesis of the first can
	// come.
	bob.send(&wire.UserMessage{ID: "msg_text2", ConversationID: "conv_voice_text", Content: "Still there?"})
	bob.until("the second answer", func(g []*wire.Envelope) bool {
		n := 0
		for _, e := range g {
			if s, ok := e.Body.(*wire.AssistantSentence); ok && s.IsFinal {
				n++
			}
		}
		return n == 2
	})
	if s := synthesised(); len(s) != 0 {
		t.Fatalf("synthesised %q for a client without audio_output", s)
	}

	carol := join(t, lk, cfg, "conv_voice_audio", "carol")
	carol.greeted()
	carol.send(&wire.Configuration{Features: []string{wire.FeatureStreaming, wire.FeatureAudioOutput}})
	carol.until("configured", func(g []*wire.Envelope) bool { return has[*wire.Configuration](g) > 1 })
	carol.send(&wire.UserMessage{ID: "msg_audio1", ConversationID: "conv_voice_audio", Content: "Hello?"})
	carol.until("the final sentence", finalSentence)
	testenv.Eventually(t, "a synthesis for a client with audio_output", func() bool { return len(synthesised()) > 0 })
	if s := synthesised()[0]; !strings.HasPrefix(s, "You said: Hello?") {
		t.Fatalf("spoke %q first", s)
	}
}

// A stock LiveKit frontend types into lk.chat and says nothing of what
// it can display: its message is answered like a typed UserMessage,
// spoken on the bot's track with the answer's words on lk.transcription,
// and stored.
func TestStockClientChat(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	cfg, store, _, synthesised := voiceAgent(t, lk)
	const conv = "conv_stock_chat"
	token, err := room.UserToken(cfg, conv, "dave", "dave", nil)
	if err != nil {
		t.Fatal(err)
	}
	streams := make(chan [2]string, 16)
	r, err := lksdk.ConnectToRoomWithToken(lk.URL, token, lksdk.NewRoomCallback())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Disconnect()
	if err := r.RegisterTextStreamHandler(room.TranscriptionTopic, func(tr *lksdk.TextStreamReader, _ string) {
		text := tr.ReadAll()
		streams <- [2]string{tr.Info.Attributes[room.AttrSegmentID], text}
	}); err != nil {
		t.Fatal(err)
	}
	// The bot's greeting is the barrier after which it hears the room.
	testenv.Eventually(t, "the bot in the room", func() bool {
		return len(r.GetRemoteParticipants()) > 0 && r.GetRemoteParticipants()[0].Attributes()[room.AgentStateAttribute] != ""
	})
	r.LocalParticipant.SendText("Hello there?", lksdk.StreamTextOptions{Topic: room.ChatTopic})
	var answer string
	for answer == "" {
		select {
		case s := <-streams:
			if strings.HasPrefix(s[0], "SG_answer_") {
				answer = s[1]
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no spoken answer on lk.transcription")
		}
	}
	t.Logf("the agent said %q", answer)
	if !strings.HasPrefix(answer, "You said: Hello there?") || len(synthesised()) == 0 {
		t.Fatalf("answer %q, %d sentences synthesised", answer, len(synthesised()))
	}
	hist, err := store.History(context.Background(), conv)
	if err != nil || len(hist) < 2 || hist[0].Content != "Hello there?" {
		t.Fatalf("stored %+v, %v", hist, err)
	}
}

// trackFrame is one decoded frame of the bot's voice: when it came, how
// loud it was, and how much of it is the thinking cue's tone.
type trackFrame struct {
	at        time.Time
	rms, tone float64
}

// frameRecorder keeps the bot's voice as frames, to tell the cue from
// speech by the cue's two partials.
type frameRecorder struct {
	mu     sync.Mutex
	frames []trackFrame
}

func (r *frameRecorder) WriteSample(p media.PCM16Sample) error {
	f := measureFrame(p, time.Now())
	r.mu.Lock()
	r.frames = append(r.frames, f)
	r.mu.Unlock()
	return nil
}

// measureFrame is frame p of the bot's voice, come at at.
func measureFrame(p []int16, at time.Time) trackFrame {
	var sum float64
	for _, v := range p {
		sum += float64(v) * float64(v)
	}
	f := trackFrame{at: at, rms: math.Sqrt(sum / float64(max(1, len(p))))}
	if sum > 0 {
		f.tone = (goertzel(p, 392) + goertzel(p, 588)) / (sum * float64(len(p)) / 2)
	}
	return f
}

func (r *frameRecorder) Close() error { return nil }

// goertzel is the power of frequency f in p, at voice.InputRate.
func goertzel(p []int16, f float64) float64 {
	w := 2 * math.Pi * f / voice.InputRate
	c := 2 * math.Cos(w)
	var s1, s2 float64
	for _, v := range p {
		s1, s2 = float64(v)+c*s1-s2, s1
	}
	return s1*s1 + s2*s2 - c*s1*s2
}

// cue and speech classify a loud frame: the cue is nearly all its two
// partials, speech spreads over many.
func (f trackFrame) cue() bool    { return f.rms > 300 && f.tone > 0.6 }
func (f trackFrame) speech() bool { return f.rms > 300 && f.tone < 0.3 }

// sure is how many frames in a row must be of a kind before the first
// of them is taken as that kind. A client starved for a second receives
// the bot's voice in a burst, and its decoder conceals what its jitter
// buffer dropped with frames that are neither tone nor speech: one such
// frame inside the cue must not pass for the answer's first word.
const sure = 3

// after returns the first frame after t that is, and begins sure frames
// in a row that are; and the frames since t.
func (r *frameRecorder) after(t time.Time, is func(trackFrame) bool) (trackFrame, bool, []trackFrame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var since []trackFrame
	run := 0
	for _, f := range r.frames {
		if f.at.Before(t) {
			continue
		}
		since = append(since, f)
		run++
		if !is(f) {
			run = 0
		}
		if run == sure {
			return since[len(since)-sure], true, since
		}
	}
	return trackFrame{}, false, since
}

// waitFor waits for the first frame after t that is, up to 30 s.
func (r *frameRecorder) waitFor(tb testing.TB, t time.Time, what string, is func(trackFrame) bool) (trackFrame, []trackFrame) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if f, ok, since := r.after(t, is); ok {
			return f, since
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, _, since := r.after(t, is)
	var loud int
	var tone float64
	for _, f := range since {
		if f.rms > 300 {
			loud++
			tone = max(tone, f.tone)
		}
	}
	tb.Fatalf("no %s on the bot's track: %d frames since, %d of them loud, the most tonal %.2f", what, len(since), loud, tone)
	return trackFrame{}, nil
}

// A spoken question to a model that would reason for 8 s: the thinking
// cue is heard on the bot's track soon after the end of the speech and
// stops before the answer's first word; the 3 s budget cuts the
// reasoning, which the client is shown and storage keeps as cut short.
// Then a question, and while its answer is still being thought (the cue
// playing), more words: the cue falls silent, and the whole question is
// answered once and stored as one user message.
func TestThinkingAloudOverLiveKit(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	question, more := "How far is the moon?", "What is the weather like in Paris today?"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := standin.Scenario{Name: "long", Rounds: []standin.Round{{
		Reasoning:   []string{"The user asks something that takes thought.", "I weigh it carefully before I answer."},
		ReasonForMs: 8000,
		Answer:      "You said: {{question}}. That took some thought.",
	}}}
	budget := pipeline.Thinking{Mode: pipeline.ThinkingBudget, Budget: pipeline.Budget{Duration: 3 * time.Second}}
	cfg, store, _, _ := voiceAgentWith(t, lk, modelSetup{
		scenarios: []standin.Scenario{long},
		pacing:    standin.Pacing{TTFTMs: 50, TokenMs: 11},
		thinking:  &pipeline.ThinkingPolicy{Typed: pipeline.Thinking{Mode: pipeline.ThinkingOn}, Spoken: budget},
	}, question, more, "you said")
	const conv = "conv_thinking_aloud"
	rec := &frameRecorder{}
	u, mic, _ := listeningUser(t, lk, cfg, conv, "erin", rec)
	speak(ctx, mic, speechtest.Silence(2000, voice.InputRate))
	speak(ctx, mic, trimmed(speechtest.Render(t, question, 140, voice.InputRate)))
	spoken := time.Now()
	speak(ctx, mic, speechtest.Silence(500, voice.InputRate))

	cue, _ := rec.waitFor(t, spoken, "thinking cue", trackFrame.cue)
	first, _ := rec.waitFor(t, spoken, "answer", trackFrame.speech)
	got := u.until("the final sentence", finalSentence)
	steps := bodies[*wire.ReasoningStep](got)
	t.Logf("end of speech → cue %v, → first answer audio %v (budget 3 s); %d reasoning steps",
		cue.at.Sub(spoken).Round(time.Millisecond), first.at.Sub(spoken).Round(time.Millisecond), len(steps))
	if len(steps) == 0 || !steps[len(steps)-1].CutShort {
		t.Fatalf("steps %+v: the last is not marked cut short", steps)
	}
	if !cue.at.Before(first.at) {
		t.Fatal("the cue came after the answer")
	}
	// Once the answer has played out, no cue came after its first word.
	u.listening()
	if f, ok, _ := rec.after(first.at, trackFrame.cue); ok {
		t.Fatalf("the cue played %v after the answer began", f.at.Sub(first.at))
	}
	hist, _ := store.History(ctx, conv)
	if len(hist) < 2 || len(hist[1].Steps) == 0 || !hist[1].Steps[len(hist[1].Steps)-1].CutShort {
		t.Fatalf("stored %+v", hist)
	}

	// A question; while its answer is being thought, more words.
	speak(ctx, mic, trimmed(speechtest.Render(t, more, 140, voice.InputRate)))
	asked := time.Now()
	speak(ctx, mic, speechtest.Silence(500, voice.InputRate))
	cue2, _ := rec.waitFor(t, asked, "second thinking cue", trackFrame.cue)
	following := time.Now()
	speak(ctx, mic, trimmed(speechtest.Render(t, question, 140, voice.InputRate)))
	followed := time.Now()
	speak(ctx, mic, speechtest.Silence(500, voice.InputRate))
	deadline := time.Now().Add(40 * time.Second)
	var answers, users []storage.Entry
	for time.Now().Before(deadline) {
		hist, _ = store.History(ctx, conv)
		answers, users = nil, nil
		for _, e := range hist[2:] {
			switch {
			case e.Role == "user":
				users = append(users, e)
			case e.Status == storage.StatusComplete:
				answers = append(answers, e)
			}
		}
		if len(answers) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(users) != 1 || len(answers) != 1 || speechtest.WER(more+" "+question, users[0].Content) > 0.2 || answers[0].PreviousID != users[0].ID {
		t.Fatalf("stored users %+v, answers %+v", users, answers)
	}
	t.Logf("the cue began %v after the second question; stored %q, answered %q", cue2.at.Sub(asked).Round(time.Millisecond), users[0].Content, answers[0].Content)
	// Talking over the cue silenced it: none while the user spoke (after
	// the pause at the onset) nor before the new question's own cue time.
	if f, ok, _ := rec.after(following.Add(300*time.Millisecond), trackFrame.cue); ok && f.at.Before(followed.Add(900*time.Millisecond)) {
		t.Fatalf("the cue played %v after the user began to add to the question", f.at.Sub(following))
	}
}

// trimmed drops the silence espeak-ng leaves around speech, so that the
// end of what is written is the end of the voice.
func trimmed(pcm []int16) []int16 {
	start, end := 0, len(pcm)
	for start < end && pcm[start] < 500 && pcm[start] > -500 {
		start++
	}
	for end > start && pcm[end-1] < 500 && pcm[end-1] > -500 {
		end--
	}
	return pcm[start:end]
}

// listeningUser joins conv as identity with a client that streams, shows
// reasoning and plays audio, records the bot's voice into rec, and
// publishes a microphone.
func listeningUser(t testing.TB, lk *testenv.LiveKit, cfg room.Config, conv, identity string, rec lkmedia.PCMRemoteTrackWriter) (*user, *lkmedia.PCMLocalTrack, *lksdk.LocalTrackPublication) {
	t.Helper()
	mic, err := lkmedia.NewPCMLocalTrack(voice.InputRate, 1, protoLogger.GetLogger())
	if err != nil {
		t.Fatal(err)
	}
	u, pub := listeningUserWith(t, lk, cfg, conv, identity, rec, mic)
	return u, mic, pub
}

// listeningUserWith is listeningUser with its microphone track.
func listeningUserWith(t testing.TB, lk *testenv.LiveKit, cfg room.Config, conv, identity string, rec lkmedia.PCMRemoteTrackWriter, mic webrtc.TrackLocal) (*user, *lksdk.LocalTrackPublication) {
	t.Helper()
	token, err := room.UserToken(cfg, conv, identity, identity, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := &user{t: t, lk: lk, agent: cfg.AgentName}
	var tracks []*lkmedia.PCMRemoteTrack
	var mu sync.Mutex
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
		if p, ok := data.(*lksdk.UserDataPacket); ok && p.Topic == room.Topic {
			if env, err := wire.Unmarshal(p.Payload); err == nil {
				u.mu.Lock()
				u.got = append(u.got, env)
				u.mu.Unlock()
			}
		}
	}
	cb.OnTrackSubscribed = func(track *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
		r, err := lkmedia.NewPCMRemoteTrack(track, rec, lkmedia.WithTargetSampleRate(voice.InputRate))
		if err != nil {
			t.Errorf("record: %v", err)
			return
		}
		mu.Lock()
		tracks = append(tracks, r)
		mu.Unlock()
	}
	if u.room, err = lksdk.ConnectToRoomWithToken(lk.URL, token, cb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		u.room.Disconnect()
		mu.Lock()
		defer mu.Unlock()
		for _, r := range tracks {
			r.Close()
		}
	})
	u.greeted()
	u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming, wire.FeatureReasoningSteps, wire.FeatureAudioOutput}})
	u.until("configured", func(g []*wire.Envelope) bool { return has[*wire.Configuration](g) > 1 })
	pub, err := u.room.LocalParticipant.PublishTrack(mic, &lksdk.TrackPublicationOptions{Name: "mic", Source: livekit.TrackSource_MICROPHONE})
	if err != nil {
		t.Fatal(err)
	}
	return u, pub
}

// listening waits for the bot's lk.agent.state to say it listens.
func (u *user) listening() {
	u.until("the agent listening", func([]*wire.Envelope) bool {
		for _, p := range u.room.GetRemoteParticipants() {
			if p.Attributes()[room.AgentStateAttribute] == string(voice.StateListening) {
				return true
			}
		}
		return false
	})
}

// BenchmarkThinkingAloud: a spoken question, over a real livekit-server,
// to a model that reasons for 1, 3 or 10 s, with a spoken budget of 3 s
// or none: from the end of the speech to the first audible output (the
// thinking cue or the answer) and to the answer's first audio, as the
// client hears them. Each iteration is one question: run it with
// -benchtime Nx.
func BenchmarkThinkingAloud(b *testing.B) {
	lk := testenv.StartLiveKit(b)
	question := "How far is the moon?"
	for _, reason := range []int{1, 3, 10} {
		for _, budgeted := range []bool{false, true} {
			b.Run(fmt.Sprintf("reason=%ds/budget=%v", reason, budgeted), func(b *testing.B) {
				scenario := standin.Scenario{Name: "think", Rounds: []standin.Round{{
					Reasoning:   []string{"The user asks how far away the moon is."},
					ReasonForMs: reason * 1000,
					Answer:      "You said: {{question}}. It is far.",
				}}}
				spoken := pipeline.Thinking{Mode: pipeline.ThinkingOn}
				if budgeted {
					spoken = pipeline.Thinking{Mode: pipeline.ThinkingBudget, Budget: pipeline.Budget{Duration: 3 * time.Second}}
				}
				cfg, _, _, _ := voiceAgentWith(b, lk, modelSetup{scenarios: []standin.Scenario{scenario},
					pacing: standin.Pacing{TTFTMs: 50, TokenMs: 11}, thinking: &pipeline.ThinkingPolicy{Typed: spoken, Spoken: spoken}}, question, "you said")
				rec := &frameRecorder{}
				u, mic, _ := listeningUser(b, lk, cfg, fmt.Sprintf("conv_think_%d_%v", reason, budgeted), "ivy", rec)
				ctx := context.Background()
				speak(ctx, mic, speechtest.Silence(1000, voice.InputRate))
				speech := trimmed(speechtest.Render(b, question, 140, voice.InputRate))
				toOutput, toAnswer := askRepeatedly(b, u, mic, rec, speech, 500)
				b.ReportMetric(float64(toOutput.Milliseconds())/float64(b.N), "ms-to-first-audio")
				b.ReportMetric(float64(toAnswer.Milliseconds())/float64(b.N), "ms-to-answer")
			})
		}
	}
}

// askRepeatedly asks the spoken question once per benchmark iteration,
// each followed by silenceMs of silence, and sums the times from the end
// of its speech to the bot's first audio (cue or answer) and to its
// answer.
func askRepeatedly(b *testing.B, u *user, mic *lkmedia.PCMLocalTrack, rec *frameRecorder, speech []int16, silenceMs int) (toOutput, toAnswer time.Duration) {
	ctx := context.Background()
	for b.Loop() {
		speak(ctx, mic, speech)
		end := time.Now()
		speak(ctx, mic, speechtest.Silence(silenceMs, voice.InputRate))
		first, _ := rec.waitFor(b, end, "audio", func(f trackFrame) bool { return f.rms > 300 })
		answer, _ := rec.waitFor(b, end, "answer", trackFrame.speech)
		toOutput += first.at.Sub(end)
		toAnswer += answer.at.Sub(end)
		u.listening()
	}
	return toOutput, toAnswer
}
