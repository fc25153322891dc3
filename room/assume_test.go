package room

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// A client that sends its Configuration once, before the bot is in the
// room (so it reaches nobody), and never again, understanding neither the
// greeting nor the 202 that asks for it: its question is answered after
// the grace, as a client with the deployment's assumed features and the
// user's stored preference, and the Configuration that says so lists
// what was assumed. A Configuration it sends later re-configures it.
func TestClientThatNeverConfiguresIsServedWithAssumedFeatures(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	ctx := context.Background()
	store, err := storage.Open(ctx, storage.Config{DatabaseURL: testenv.Database(t), Logger: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(context.Background()) })
	if err := store.SetMode(ctx, "zoe", reasoning.ModeSummary); err != nil {
		t.Fatal(err)
	}
	model, _ := standin.New(nil, standin.Pacing{TTFTMs: 5, TokenMs: 1}, nil)
	modelSrv := httptest.NewServer(model.Handler())
	t.Cleanup(modelSrv.Close)
	backend, err := llm.New(llm.Config{Backend: "openai", URL: modelSrv.URL + "/vllm/v1", Model: "Qwen3-8B"})
	if err != nil {
		t.Fatal(err)
	}
	engine := pipeline.NewEngine(pipeline.Config{LLM: backend, Thinking: true, Logger: testenv.Log(t)}, store)
	// The assumed features and the grace are the defaults.
	cfg := Config{LiveKitURL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, AgentName: "alicia-assume"}
	a := NewAgent(cfg, store, NewMetrics(nil), func(id string) Conversation { return engine.Open(id) }, testenv.Log(t))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-a.Registered():
	case <-time.After(10 * time.Second):
		t.Fatal("the agent worker did not register")
	}

	// A token whose room dispatches no bot, with no features in its
	// attributes: the client is in the room before the bot.
	const name = "conv_never_configures"
	grant := &auth.VideoGrant{RoomJoin: true, Room: name}
	token, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("zoe").SetValidFor(time.Hour).SetVideoGrant(grant).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, identity: "zoe", raw: map[int32][]byte{}, notify: make(chan struct{}, 1)}
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
		if u, ok := data.(*lksdk.UserDataPacket); ok && u.Topic == Topic {
			c.add(u.Payload)
		}
	}
	c.room, err = lksdk.ConnectToRoomWithToken(lk.URL, token, cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.room.Disconnect)
	c.send(&wire.Configuration{Features: []string{wire.FeatureStreaming, wire.FeatureReasoningSteps}}) // reaches nobody
	lk.Dispatch(t, cfg.AgentName, name)

	c.wait("the greeting", func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 })
	q1 := c.send(&wire.UserMessage{ID: "msg_q1", ConversationID: name, Content: "Why is the sky blue?"})
	got := c.wait("the answer", func(g []*wire.Envelope) bool { return finalSentenceOf(g, "msg_q1") })

	// In order: the greeting asking for a Configuration, the 202 about
	// the question, the Configuration saying what was assumed, then the
	// answer.
	asked, assumed, answered := -1, -1, -1
	var reply *wire.Configuration
	for i, env := range got {
		switch b := env.Body.(type) {
		case *wire.ErrorMessage:
			if b.Code != wire.CodeInvalidState || env.Meta["originatingStanzaId"] != int64(q1) || asked >= 0 {
				t.Fatalf("unexpected error %+v (meta %v)", b, env.Meta)
			}
			asked = i
		case *wire.Configuration:
			if slices.Contains(b.Features, wire.FeatureAssumedConfiguration) && assumed < 0 {
				assumed, reply = i, b
			}
		case *wire.StartAnswer:
			if answered < 0 {
				answered = i
			}
		}
	}
	if asked < 0 || assumed < asked || answered < assumed {
		t.Fatalf("want greeting, 202, assumed Configuration, answer in that order; got %s", describe(got))
	}
	for _, f := range []string{wire.FeatureChoice(wire.FeatureAssumed, wire.FeatureStreaming), wire.FeatureChoice(wire.FeatureAssumed, wire.FeatureReasoningSteps),
		// The stored preference (summary), within what was assumed
		// (reasoning steps).
		wire.FeatureReasoningSummary, reasoning.PreferenceFeature(reasoning.ModeSummary)} {
		if !slices.Contains(reply.Features, f) {
			t.Fatalf("the assumed Configuration %v lacks %q", reply.Features, f)
		}
	}
	if reply.ConversationID != name {
		t.Fatalf("the assumed Configuration names conversation %q", reply.ConversationID)
	}
	steps := 0
	for _, env := range got {
		if s, ok := env.Body.(*wire.ReasoningStep); ok && !s.Partial {
			steps++
			if s.Content != reasoning.Summarize(s.Content) {
				t.Fatalf("step %q is not a summary: the stored preference was not applied", s.Content)
			}
		}
	}
	if steps == 0 || count[*wire.AssistantMessage](got) != 0 {
		t.Fatalf("want a streamed answer with summarised steps; got %s", describe(got))
	}

	// A Configuration that comes late replaces the assumption: answered
	// as any Configuration (nothing marked assumed), and the next answer
	// follows it (no reasoning panel: no step).
	last := -got[len(got)-1].StanzaID
	c.send(&wire.Configuration{ConversationID: name, Features: []string{wire.FeatureStreaming}})
	got = c.wait("the reply to the late Configuration", func(g []*wire.Envelope) bool {
		return slices.ContainsFunc(g, func(e *wire.Envelope) bool {
			b, ok := e.Body.(*wire.Configuration)
			return ok && -e.StanzaID > last && !slices.Contains(b.Features, wire.FeatureAssumedConfiguration)
		})
	})
	before := len(got)
	c.send(&wire.UserMessage{ID: "msg_q2", ConversationID: name, Content: "And at sunset?"})
	got = c.wait("the second answer", func(g []*wire.Envelope) bool { return finalSentenceOf(g, "msg_q2") })
	for _, env := range got[before:] {
		switch b := env.Body.(type) {
		case *wire.ReasoningStep:
			t.Fatalf("a step for a client that said it has no reasoning panel: %+v", b)
		case *wire.Configuration:
			if slices.Contains(b.Features, wire.FeatureAssumedConfiguration) {
				t.Fatalf("still marked assumed after its Configuration: %v", b.Features)
			}
		case *wire.ErrorMessage:
			t.Fatalf("error after the late Configuration: %+v", b)
		}
	}
}

// A client that talks before its Configuration and leaves before its
// grace ends is not served when the grace ends: the next device under
// the same identity is greeted as unknown and, when it talks, asked for
// its own Configuration, which then answers what both kept.
func TestGraceEndsWhenTheUserLeaves(t *testing.T) {
	rec := &recorder{}
	// The grace never ends by itself here: the test queues its end where
	// the timer would have, after the leave.
	s := newSession(context.Background(), SessionConfig{ID: "conv_grace_leave", Store: storage.NewMemory(storage.ReasoningPlain),
		Open: openEcho, Metrics: NewMetrics(nil), Logger: testenv.Log(t), AssumeAfter: time.Hour}, rec)
	t.Cleanup(s.Close)
	message := func(stanza int32, id string) {
		b, _ := wire.Marshal(&wire.Envelope{StanzaID: stanza, ConversationID: s.ID,
			Body: &wire.UserMessage{ID: id, ConversationID: s.ID, Content: "hello"}})
		s.receive("zoe", b)
	}
	askedAbout := func(id string) func([]*wire.Envelope) bool {
		return func(envs []*wire.Envelope) bool {
			return slices.ContainsFunc(envs, func(e *wire.Envelope) bool {
				b, ok := e.Body.(*wire.ErrorMessage)
				return ok && b.Code == wire.CodeInvalidState && b.OriginatingID == id
			})
		}
	}

	s.arrived("zoe", nil)
	message(1, "msg_old_device")
	waitFor(t, rec, askedAbout("msg_old_device")) // its grace (number 1) runs
	s.left("zoe")
	s.arrived("zoe", nil) // another device, same identity
	s.enqueue(rawPacket{from: "zoe", event: eventAssume, gen: 1})
	// Handled in order after the grace's end, and answered after anything
	// that end sent: once its reply is here, an assumption would be too.
	s.receive("zoe", []byte("not an envelope"))
	envs := waitFor(t, rec, func(envs []*wire.Envelope) bool {
		return slices.ContainsFunc(envs, func(e *wire.Envelope) bool {
			b, ok := e.Body.(*wire.ErrorMessage)
			return ok && b.Code == wire.CodeMalformed
		})
	})
	greetings := 0
	for _, e := range envs {
		if c, ok := e.Body.(*wire.Configuration); ok {
			if slices.Contains(c.Features, wire.FeatureAssumedConfiguration) {
				t.Fatalf("served with assumed features after leaving: %v; sent %s", c.Features, describe(envs))
			}
			if slices.Contains(c.Features, wire.FeatureAwaitingConfiguration) {
				greetings++
			}
		}
		if _, ok := e.Body.(*wire.Acknowledgement); ok {
			t.Fatalf("a kept message was answered before any Configuration; sent %s", describe(envs))
		}
	}
	if greetings < 2 {
		t.Fatalf("the new device was not greeted as unknown; sent %s", describe(envs))
	}

	// The new device talks: it is asked for its own Configuration.
	message(1, "msg_new_device")
	waitFor(t, rec, askedAbout("msg_new_device"))
	configure(t, s, "zoe", 2, 0)
	waitFor(t, rec, func(envs []*wire.Envelope) bool { return count[*wire.Acknowledgement](envs) == 2 })
}

// finalSentenceOf: the answer to the user message id has ended.
func finalSentenceOf(envs []*wire.Envelope, id string) bool {
	answer := ""
	for _, e := range envs {
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
