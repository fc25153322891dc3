package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/failover"
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

// A bad server of each kind: refusing (a closed port), erroring (HTTP 500
// before anything, as a crashed backend behind a proxy answers) and slow
// (nothing until the client gives up). The erroring and slow ones wrap the
// real stand-in, so that only their fault tells them from a good one.
var badServers = []struct {
	name string
	wrap func(t *testing.T, h http.Handler) string
}{
	{"down", func(t *testing.T, _ http.Handler) string { return testenv.ClosedURL(t) }},
	{"erroring", func(t *testing.T, h http.Handler) string {
		return gated(t, h, func() bool { return true }).URL
	}},
	{"slow", func(t *testing.T, h http.Handler) string { return testenv.SlowServer(t, h).URL }},
}

// gated serves h, or HTTP 500 while down says so.
func gated(t *testing.T, h http.Handler, down func() bool) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down() {
			http.Error(w, `{"error":{"message":"the engine died","type":"internal_error"}}`, http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// A typed question over a real livekit-server is answered by the second
// model server, within the same turn, when the first is down, erroring or
// slow; the pool (what /readyz shows) says the second serves.
func TestModelFailoverOverLiveKit(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	good, _ := standin.New(nil, standin.Pacing{TTFTMs: 5, TokenMs: 1}, nil)
	for _, bad := range badServers {
		t.Run(bad.name, func(t *testing.T) {
			second, asked := testenv.CountingServer(t, good.Handler(), pathEnds("/chat/completions"))
			first := bad.wrap(t, good.Handler()) + "/vllm/v1"
			client, err := llm.New(llm.Config{Backend: "openai", URL: first + "," + second.URL + "/vllm/v1", Model: "Qwen3-8B",
				FirstByteTimeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			cfg := startAgent(t, lk, client, storage.NewMemory(storage.ReasoningPlain))
			conv := "conv_llm_failover_" + bad.name
			u := join(t, lk, cfg, conv, "alice")
			u.greeted()
			u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
			u.until("configured", func(g []*wire.Envelope) bool { return has[*wire.Configuration](g) > 1 })
			u.send(&wire.UserMessage{ID: "msg_q1", ConversationID: conv, Content: "Hello?"})
			got := u.until("the answer", finalSentence)
			var answer strings.Builder
			for _, e := range got {
				switch b := e.Body.(type) {
				case *wire.AssistantSentence:
					answer.WriteString(b.Text)
				case *wire.ErrorMessage:
					t.Fatalf("an error for a turn the second server could answer: %+v", b)
				}
			}
			if !strings.HasPrefix(answer.String(), `You said: "Hello?"`) || asked.Load() != 1 {
				t.Fatalf("answer %q; the second server asked %d times", answer.String(), asked.Load())
			}
			st := client.(failover.Served).Servers().Status()
			if st.Serving != second.URL+"/vllm/v1" || st.Servers[0].State != "down" {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// speechAgent runs the bot with the engine, the model stand-in and the
// speech of pc (the streaming transports serve uses for the stand-in).
func speechAgent(t *testing.T, lk *testenv.LiveKit, pc speech.ProviderConfig) (room.Config, voice.Recognizer, voice.Synthesizer) {
	t.Helper()
	s, _ := standin.New(nil, standin.Pacing{TTFTMs: 5, TokenMs: 1}, nil)
	model := httptest.NewServer(s.Handler())
	t.Cleanup(model.Close)
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	var logs testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	pc.STTTransport, pc.STTStream, pc.TTSFormat, pc.TTSRate, pc.TTSStreamFormat = "realtime", true, "pcm", speechstandin.PCMRate, "sse"
	pc.Logger = log
	if err := pc.Validate(); err != nil {
		t.Fatal(err)
	}
	rec, syn := pc.Recognizer(), pc.Synthesizer()
	mem := storage.NewMemory(storage.ReasoningPlain)
	cfg := room.Config{LiveKitURL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, AgentName: "alicia-failover"}
	engine := pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true, Logger: log}, mem)
	agent := room.NewAgent(cfg, mem, room.NewMetrics(nil), func(id string) room.Conversation { return engine.Open(id) }, log)
	agent.EnableVoice(room.VoiceConfig{OutputRate: speechstandin.PCMRate, Stage: voice.Config{Recognizer: rec, Synthesizer: syn, Logger: log}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); agent.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-agent.Registered()
	return cfg, rec, syn
}

func speechStandin(t *testing.T, phrases ...string) http.Handler {
	testenv.SpeechEngines(t)
	sp, err := speechstandin.New(speechstandin.Config{Phrases: phrases, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp.Handler()
}

// A spoken question over a real livekit-server, with the first recogniser
// and the first synthesiser down, erroring or slow: the second (the real
// speech stand-in) recognises it and speaks the answer, within the same
// turn.
func TestSpeechFailoverOverLiveKit(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	question := "How far is the moon?"
	for _, bad := range badServers {
		t.Run(bad.name, func(t *testing.T) {
			h := speechStandin(t, question)
			second, synthesised := testenv.CountingServer(t, h, pathEnds("/audio/speech"))
			pc := speech.ProviderConfig{
				STTURL: bad.wrap(t, h) + "/v1," + second.URL + "/v1", TTSURL: bad.wrap(t, h) + "/v1," + second.URL + "/v1",
				STTFirstByte: time.Second, TTSFirstByte: time.Second,
			}
			cfg, rec, syn := speechAgent(t, lk, pc)
			conv := "conv_speech_failover_" + bad.name
			heard := &pcmQueue{ch: make(chan []int16, 8192)}
			u, mic, _ := listeningUser(t, lk, cfg, conv, "alice", heard)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			speak(ctx, mic, append(append(speechtest.Silence(2000, voice.InputRate), speechtest.Render(t, question, 140, voice.InputRate)...), speechtest.Silence(1000, voice.InputRate)...))
			got := u.until("the answer", finalSentence)
			var final *wire.Transcription
			for _, e := range got {
				switch b := e.Body.(type) {
				case *wire.Transcription:
					if b.Final {
						final = b
					}
				case *wire.ErrorMessage:
					t.Fatalf("an error for a turn the second servers could serve: %+v", b)
				}
			}
			if final == nil || speechtest.WER(question, final.Text) > 0.2 {
				t.Fatalf("final transcript %+v", final)
			}
			// The answer is spoken by the second synthesiser (polling its
			// state, not proving an absence).
			testenv.Eventually(t, "the second synthesiser to be asked", func() bool {
				return synthesised.Load() > 0 && syn.(failover.Served).Servers().Status().Serving == second.URL+"/v1"
			})
			for _, p := range []*failover.Pool{rec.(failover.Served).Servers(), syn.(failover.Served).Servers()} {
				if st := p.Status(); st.Serving != second.URL+"/v1" || st.Servers[0].State != "down" {
					t.Fatalf("%s status %+v", p.Kind(), st)
				}
			}
		})
	}
}

// With every recogniser and every synthesiser down, typed questions are
// still answered as text, and the voice client hears of each outage once,
// with an ErrorMessage (503), not with every utterance or sentence.
func TestSpeechOutageOverLiveKit(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	q1, q2, q3 := "How far is the moon?", "What is the weather like in Paris today?", "Tell me a joke"
	h := speechStandin(t, q1, q2, q3)
	var down atomic.Bool
	down.Store(true)
	isDown := down.Load
	servers := gated(t, h, isDown).URL + "/v1," + gated(t, h, isDown).URL + "/v1"
	cfg, _, _ := speechAgent(t, lk, speech.ProviderConfig{STTURL: servers, TTSURL: servers, STTFirstByte: time.Second, TTSFirstByte: time.Second})
	const conv = "conv_speech_outage"
	heard := &pcmQueue{ch: make(chan []int16, 8192)}
	u, mic, _ := listeningUser(t, lk, cfg, conv, "alice", heard)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	utter := func(text string) {
		speak(ctx, mic, append(append(speechtest.Silence(1000, voice.InputRate), speechtest.Render(t, text, 140, voice.InputRate)...), speechtest.Silence(1000, voice.InputRate)...))
	}
	errs := func(g []*wire.Envelope) []*wire.ErrorMessage {
		var out []*wire.ErrorMessage
		for _, e := range g {
			if m, ok := e.Body.(*wire.ErrorMessage); ok {
				out = append(out, m)
			}
		}
		return out
	}
	finals := func(n int) func(g []*wire.Envelope) bool {
		return func(g []*wire.Envelope) bool {
			c := 0
			for _, e := range g {
				if s, ok := e.Body.(*wire.AssistantSentence); ok && s.IsFinal {
					c++
				}
			}
			return c >= n
		}
	}

	// Recognition fails: the client is told.
	utter(q1)
	u.until("an error for the recognition outage", func(g []*wire.Envelope) bool { return len(errs(g)) >= 1 })
	// A typed question is answered as text; its speech fails, and the
	// client is told that too.
	u.send(&wire.UserMessage{ID: "msg_typed1", ConversationID: conv, Content: "Hello?"})
	u.until("the typed answer", finals(1))
	u.until("an error for the synthesis outage", func(g []*wire.Envelope) bool { return len(errs(g)) >= 2 })
	// More of the same outage: another utterance, another typed answer.
	utter(q2)
	u.send(&wire.UserMessage{ID: "msg_typed2", ConversationID: conv, Content: "Still there?"})
	u.until("the second typed answer", finals(2))

	// The servers come back. A third utterance is recognised and its
	// answer heard: utterances are recognised, and answers spoken, in
	// order, so everything before has failed (and been reported) by then.
	down.Store(false)
	back := time.Now()
	utter(q3)
	u.until("the third utterance's answer", finals(3))
	testenv.Eventually(t, "an answer heard after the servers came back", func() bool { return heard.loudAt().After(back) })

	u.mu.Lock()
	all := append([]*wire.Envelope(nil), u.got...)
	u.mu.Unlock()
	got := errs(all)
	var stt, tts int
	for _, e := range got {
		t.Logf("ErrorMessage %d: %s", e.Code, e.Message)
		if e.Code != wire.CodeServiceUnavailable || !e.Recoverable {
			t.Fatalf("error %+v", e)
		}
		switch {
		case strings.Contains(e.Message, "recognition"):
			stt++
		case strings.Contains(e.Message, "synthesis"):
			tts++
		}
	}
	if stt != 1 || tts != 1 || len(got) != 2 {
		t.Fatalf("%d errors: %d about recognition, %d about synthesis; want one of each", len(got), stt, tts)
	}
	var finalT int
	for _, e := range all {
		if tr, ok := e.Body.(*wire.Transcription); ok && tr.Final {
			finalT++
			if speechtest.WER(q3, tr.Text) > 0.3 {
				t.Fatalf("transcript %q during the outage", tr.Text)
			}
		}
	}
	if finalT != 1 {
		t.Fatalf("%d final transcripts, want the third utterance's only", finalT)
	}
}

// transcriber answers every upload with a transcript once it has taken
// delay over it, as a recogniser on a CPU does, or, with a delay of -1,
// never (until the client gives up).
func transcriber(t *testing.T, delay time.Duration, text string) (*httptest.Server, *atomic.Int32) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		wait := time.After(delay)
		if delay < 0 {
			wait = nil
		}
		select {
		case <-wait:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"text":"`+text+`"}`)
		case <-r.Context().Done():
		}
	})
	return testenv.CountingServer(t, h, pathEnds("/audio/transcriptions"))
}

// An upload is answered once it is transcribed, which takes longer the
// longer the utterance: a recogniser that takes most of the audio's
// length is not set aside, however short the first-byte timeout, and
// one still silent past the timeout plus the audio's length is.
func TestFailoverWaitsForLongUploads(t *testing.T) {
	audio := make([]int16, 2*voice.InputRate) // two seconds
	for _, tc := range []struct {
		name   string
		delay  time.Duration
		served int // the server that answers
	}{
		{"long utterance", 700 * time.Millisecond, 0},
		{"silent", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, firstAsked := transcriber(t, tc.delay, "from the first")
			second, secondAsked := transcriber(t, 0, "from the second")
			rec := speech.ProviderConfig{STTURL: first.URL + "/v1," + second.URL + "/v1", STTTransport: "http", STTFirstByte: 100 * time.Millisecond,
				Logger: slog.New(slog.DiscardHandler)}.Recognizer()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var final speech.RecognizeEvent
			for ev := range rec.Stream(ctx, &speech.RecognizeRequest{Audio: audio, SampleRate: voice.InputRate}) {
				final = ev
			}
			want := []string{"from the first", "from the second"}[tc.served]
			if final.Kind != speech.RecognizeFinal || final.Text != want || firstAsked.Load() != 1 || secondAsked.Load() != int32(tc.served) {
				t.Fatalf("%+v; asked the first %d times, the second %d", final, firstAsked.Load(), secondAsked.Load())
			}
			st := rec.(failover.Served).Servers().Status()
			if wantState := []string{"serving", "down"}[tc.served]; st.Servers[0].State != wantState {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// pathEnds counts the requests to paths ending in suffix.
func pathEnds(suffix string) func(*http.Request) bool {
	return func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, suffix) }
}
