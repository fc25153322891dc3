package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/speech"
	speechstandin "github.com/alicia-voice/alicia/speech/standin"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// chatRequest is what the model was sent, as the stand-in recorded it.
type chatRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// users are the request's user messages, in order.
func (r chatRequest) users() []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			out = append(out, m.Content)
		}
	}
	return out
}

// groupAgent runs the voice bot with the real engine, the speech
// stand-in held to phrases and a Qwen3 stand-in that reasons briefly,
// answers in one short sentence and records every request.
func groupAgent(t *testing.T, lk *testenv.LiveKit, phrases ...string) (room.Config, storage.Store, func() []chatRequest) {
	t.Helper()
	short := standin.Scenario{Name: "short", Rounds: []standin.Round{{
		Reasoning: []string{"Someone asks a question.", "A short answer will do."},
		Answer:    "You said: {{question}}",
	}}}
	model, _ := standin.New([]standin.Scenario{short}, standin.Pacing{TTFTMs: 5, TokenMs: 1}, nil)
	var mu sync.Mutex
	var requests []chatRequest
	model.Recorded = func(_ *http.Request, body []byte) {
		var r chatRequest
		if json.Unmarshal(body, &r) == nil {
			mu.Lock()
			requests = append(requests, r)
			mu.Unlock()
		}
	}
	ms := httptest.NewServer(model.Handler())
	t.Cleanup(ms.Close)
	client, _ := llm.New(llm.Config{Backend: "openai", URL: ms.URL + "/vllm/v1", Model: "Qwen3-8B"})
	speechURL := speechtest.Server(t, phrases...)

	mem := storage.NewMemory(storage.ReasoningPlain)
	cfg := room.Config{LiveKitURL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, AgentName: "alicia-voice"}
	log := slog.New(slog.DiscardHandler)
	engine := pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true, Logger: log}, mem)
	agent := room.NewAgent(cfg, mem, room.NewMetrics(nil), func(id string) room.Conversation { return engine.Open(id) }, log)
	agent.EnableVoice(room.VoiceConfig{OutputRate: speechstandin.PCMRate, Stage: voice.Config{
		Recognizer:  &speech.OpenAIRecognizer{URL: speechURL + "/v1", Streaming: true},
		Synthesizer: &speech.OpenAISynthesizer{URL: speechURL + "/v1", Format: "pcm", PCMRate: speechstandin.PCMRate},
		Logger:      log,
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); agent.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-agent.Registered()
	return cfg, mem, func() []chatRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]chatRequest(nil), requests...)
	}
}

// prefers sets the user's reasoning preference through a Configuration
// update and waits for the server's reply.
func (u *user) prefers(m reasoning.Mode) {
	u.mu.Lock()
	n := has[*wire.Configuration](u.got)
	u.mu.Unlock()
	u.send(&wire.Configuration{ConversationID: u.room.Name(), Features: []string{wire.FeatureStreaming, wire.FeatureReasoningSteps, wire.FeatureAudioOutput, reasoning.PreferenceFeature(m)}})
	u.until("the preference applied", func(g []*wire.Envelope) bool { return has[*wire.Configuration](g) > n })
}

// finals are the final Transcriptions u saw, in order.
func finals(u *user) []*wire.Transcription {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []*wire.Transcription
	for _, tr := range bodies[*wire.Transcription](u.got) {
		if tr.Final && tr.Text != "" {
			out = append(out, tr)
		}
	}
	return out
}

// answered: u saw the final sentence of the answer to user message id.
func answered(id string) func([]*wire.Envelope) bool {
	return func(g []*wire.Envelope) bool {
		answer := ""
		for _, e := range g {
			switch b := e.Body.(type) {
			case *wire.StartAnswer:
				if b.PreviousID == id {
					answer = b.ID
				}
			case *wire.AssistantSentence:
				if answer != "" && b.PreviousID == answer && b.IsFinal {
					return true
				}
			}
		}
		return false
	}
}

// Two people in one room over a real livekit-server, each speaking into
// their own microphone: alice asks, then bob; then both at once. Every
// Transcription names its speaker, each utterance is its own turn with
// its own words, stored under its author; once two people have spoken,
// the model reads who said what; and the reasoning goes to alice, who
// wants it, never to bob, who does not.
func TestSeveralPeopleInOneRoom(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	moon, paris := "How far is the moon?", "What is the weather like in Paris today?"
	cfg, store, requests := groupAgent(t, lk, moon, paris, "you said")
	const conv = "conv_group"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	alice, aliceMic, _ := listeningUser(t, lk, cfg, conv, "alice", &pcmQueue{ch: make(chan []int16, 1)})
	bob, bobMic, _ := listeningUser(t, lk, cfg, conv, "bob", &pcmQueue{ch: make(chan []int16, 1)})
	alice.prefers(reasoning.ModeFull)
	bob.prefers(reasoning.ModeOff)
	silence := func(ms int) []int16 { return speechtest.Silence(ms, voice.InputRate) }
	say := func(text string) []int16 { return trimmed(speechtest.Render(t, text, 140, voice.InputRate)) }

	// One after the other.
	speak(ctx, aliceMic, append(append(silence(1500), say(moon)...), silence(800)...))
	alice.until("alice's transcript", func([]*wire.Envelope) bool { return len(finals(alice)) == 1 })
	a1 := finals(alice)[0]
	alice.until("the answer to alice", answered(a1.ID))
	alice.listening()
	speak(ctx, bobMic, append(append(silence(300), say(paris)...), silence(800)...))
	bob.until("bob's transcript", func([]*wire.Envelope) bool { return len(finals(bob)) == 2 })
	b1 := finals(bob)[1]
	alice.until("the answer to bob", answered(b1.ID))

	// At once: bob begins while alice is still speaking.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); speak(ctx, aliceMic, append(say(moon), silence(800)...)) }()
	go func() {
		defer wg.Done()
		speak(ctx, bobMic, append(append(silence(600), say(paris)...), silence(800)...))
	}()
	wg.Wait()
	alice.until("both transcripts", func([]*wire.Envelope) bool { return len(finals(alice)) == 4 })
	all := finals(alice)
	last := all[3]
	alice.until("the answer to the last question", answered(last.ID))

	// Attribution: every Transcription, interim or final, names the
	// speaker of its utterance, and both clients see the same finals.
	speakers := map[string]string{a1.ID: "alice", b1.ID: "bob"}
	for _, f := range all[2:] {
		want := "alice"
		if speechtest.WER(paris, f.Text) <= 0.2 {
			want = "bob"
		}
		speakers[f.ID] = want
	}
	for i, f := range all {
		t.Logf("final %d: %s said %q", i+1, f.Speaker, f.Text)
		want := moon
		if speakers[f.ID] == "bob" {
			want = paris
		}
		if f.Speaker != speakers[f.ID] || speechtest.WER(want, f.Text) > 0.2 {
			t.Fatalf("final Transcription %+v: want %s saying %q", f, speakers[f.ID], want)
		}
	}
	if all[2].Speaker == all[3].Speaker {
		t.Fatalf("the overlapping utterances became %q and %q, both %s's", all[2].Text, all[3].Text, all[2].Speaker)
	}
	for _, u := range []*user{alice, bob} {
		u.mu.Lock()
		for _, tr := range bodies[*wire.Transcription](u.got) {
			if want, ok := speakers[tr.ID]; ok && tr.Speaker != want {
				u.mu.Unlock()
				t.Fatalf("Transcription %+v: want speaker %s", tr, want)
			}
		}
		u.mu.Unlock()
	}

	// Storage: each user message under its author, with its own words.
	hist, err := store.History(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, e := range hist {
		if e.Role != "user" {
			continue
		}
		stored++
		if want, ok := speakers[e.ID]; !ok || e.Author != want {
			t.Fatalf("stored user message %+v: want author %s", e.Message, speakers[e.ID])
		}
	}
	if stored != 4 {
		t.Fatalf("%d user messages stored, want 4: %+v", stored, hist)
	}

	// The model's context: alice's first question as she said it (one
	// person had spoken); from bob's on, every user message names its
	// speaker.
	reqs := requests()
	named := func(f *wire.Transcription) string { return f.Speaker + ": " + f.Text }
	// The same words are asked twice: a turn's request is told by the
	// user messages it holds.
	find := func(users ...string) (chatRequest, bool) {
		for _, r := range reqs {
			if strings.Join(r.users(), "|") == strings.Join(users, "|") {
				return r, true
			}
		}
		return chatRequest{}, false
	}
	if _, ok := find(a1.Text); !ok {
		t.Fatalf("no request asks alice's first question unnamed, %q: %+v", a1.Text, reqs)
	}
	if _, ok := find(named(a1), named(b1)); !ok {
		t.Fatalf("no request for bob's turn names both: %+v", reqs)
	}
	r, ok := find(named(a1), named(b1), named(all[2]), named(last))
	if !ok {
		t.Fatalf("no request for the last turn names all four: %+v", reqs)
	}
	if !strings.Contains(r.Messages[0].Content, "Several people") {
		t.Fatalf("the system prompt %q does not say several people speak", r.Messages[0].Content)
	}

	// Reasoning: alice, who wants it shown, saw steps for her questions
	// and bob's; bob, who does not, never saw one.
	alice.mu.Lock()
	steps := bodies[*wire.ReasoningStep](alice.got)
	alice.mu.Unlock()
	about := map[string]bool{}
	for _, s := range steps {
		about[s.PreviousID] = true
	}
	if !about[a1.ID] || !about[b1.ID] || !about[last.ID] {
		t.Fatalf("alice saw steps about %v, want %s, %s and %s", about, a1.ID, b1.ID, last.ID)
	}
	bob.mu.Lock()
	n := has[*wire.ReasoningStep](bob.got)
	bob.mu.Unlock()
	if n != 0 {
		t.Fatalf("bob, who turned reasoning off, saw %d steps", n)
	}
}
