package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	aguiface "github.com/alicia-voice/alicia/pipeline/agui"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
	"github.com/alicia-voice/alicia/wire/agui"
)

type aguiEnv struct {
	lk     *testenv.LiveKit
	cfg    room.Config
	url    string
	mu     sync.Mutex
	bodies []string
}

func startAGUI(t *testing.T) *aguiEnv {
	e := &aguiEnv{lk: testenv.StartLiveKit(t)}
	s, _ := standin.New(toolScenarios, standin.Pacing{}, nil)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.bodies = append(e.bodies, string(b))
		e.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(model.Close)
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	store := storage.NewMemory(storage.ReasoningPlain)
	e.cfg = startAgent(t, e.lk, client, store)
	h := aguiface.New(pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true}, store), store, room.BearerIdentity(e.lk.APIKey, e.lk.APISecret))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// run posts a RunAgentInput and returns the events, checked against the
// Go version of the client's rules.
func (e *aguiEnv) run(t *testing.T, identity string, input string) (int, []agui.Event) {
	t.Helper()
	token, _ := auth.NewAccessToken(e.lk.APIKey, e.lk.APISecret).SetIdentity(identity).SetValidFor(time.Hour).ToJWT()
	req, _ := http.NewRequest("POST", e.url, strings.NewReader(input))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil
	}
	return 200, testenv.AGUIEvents(t, resp.Body)
}

func texts(events []agui.Event, typ agui.EventType) string {
	var b strings.Builder
	for _, e := range events {
		if e.Type == typ {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

// A conversation begun over AG-UI continues over LiveKit with its
// history, and belongs to the identity that began it.
func TestAGUIThenLiveKit(t *testing.T) {
	e := startAGUI(t)
	code, events := e.run(t, "alice", `{"threadId":"conv_shared","runId":"r1","messages":[{"id":"u1","role":"user","content":"first over agui"}],"forwardedProps":{"reasoning":"full"}}`)
	if code != 200 || !strings.Contains(texts(events, agui.TextMessageContent), "first over agui") || texts(events, agui.ReasoningMessageContent) == "" {
		t.Fatalf("AG-UI run: %d %+v", code, events)
	}
	if code, _ := e.run(t, "bob", `{"threadId":"conv_shared","runId":"r2","messages":[{"id":"u2","role":"user","content":"hi"}]}`); code != http.StatusNotFound {
		t.Fatalf("another user's thread: %d", code)
	}
	u := join(t, e.lk, e.cfg, "conv_shared", "alice")
	u.greeted()
	u.send(&wire.Configuration{ConversationID: "conv_shared", Features: []string{wire.FeatureStreaming}})
	u.send(&wire.UserMessage{ID: "u3", ConversationID: "conv_shared", Content: "second over livekit"})
	u.until("the answer", finalSentence)
	e.mu.Lock()
	last := e.bodies[len(e.bodies)-1]
	e.mu.Unlock()
	if !strings.Contains(last, "first over agui") || !strings.Contains(last, "second over livekit") {
		t.Fatalf("the model did not get the AG-UI turn as history: %s", last)
	}
	// And back to AG-UI, by the same user.
	if code, _ := e.run(t, "alice", `{"threadId":"conv_shared","runId":"r4","messages":[{"id":"u4","role":"user","content":"third over agui"}]}`); code != 200 {
		t.Fatalf("back to AG-UI: %d", code)
	}
}

// An AG-UI turn taken on a thread, through another engine, while its
// LiveKit room is live is history for the room's next turn.
func TestAGUITurnWhileLiveKitRoomIsLive(t *testing.T) {
	e := startAGUI(t)
	u := join(t, e.lk, e.cfg, "conv_live", "alice")
	u.greeted()
	u.send(&wire.Configuration{ConversationID: "conv_live", Features: []string{wire.FeatureStreaming}})
	u.send(&wire.UserMessage{ID: "u1", ConversationID: "conv_live", Content: "first over livekit"})
	u.until("the first answer", finalSentence)
	if code, _ := e.run(t, "alice", `{"threadId":"conv_live","runId":"r2","messages":[{"id":"u2","role":"user","content":"second over agui"}]}`); code != 200 {
		t.Fatalf("AG-UI run: %d", code)
	}
	u.send(&wire.UserMessage{ID: "u3", ConversationID: "conv_live", Content: "third over livekit"})
	u.until("the third answer", func(g []*wire.Envelope) bool {
		n := 0
		for _, s := range bodies[*wire.AssistantSentence](g) {
			if s.IsFinal {
				n++
			}
		}
		return n == 2
	})
	e.mu.Lock()
	last := e.bodies[len(e.bodies)-1]
	e.mu.Unlock()
	if !strings.Contains(last, "first over livekit") || !strings.Contains(last, "second over agui") || !strings.Contains(last, "third over livekit") {
		t.Fatalf("the room's next turn did not see the AG-UI turn: %s", last)
	}
}

// Tools an AG-UI client lists run on the client: the run ends with the
// call, and the next run's tool message continues it. Legacy nulls pass.
func TestAGUIClientTools(t *testing.T) {
	e := startAGUI(t)
	code, events := e.run(t, "alice", `{"threadId":"t-tools","runId":"r1","state":null,"forwardedProps":null,"unknownMember":1,
		"messages":[{"id":"u1","role":"user","content":"where am i?"}],
		"tools":[{"name":"get_location","description":"where the device is","parameters":null}]}`)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	var callID string
	for _, ev := range events {
		if ev.Type == agui.ToolCallStart && ev.ToolCallName == "get_location" {
			callID = ev.ToolCallID
		}
	}
	if callID == "" || events[len(events)-1].Type != agui.RunFinished || texts(events, agui.TextMessageContent) != "" {
		t.Fatalf("first run %+v", events)
	}
	second := `{"threadId":"t-tools","runId":"r2","messages":[{"id":"u1","role":"user","content":"where am i?"},
		{"id":"a1","role":"assistant","toolCalls":[{"id":"` + callID + `","type":"function","function":{"name":"get_location","arguments":"{}"}}]},
		{"id":"t1","role":"tool","toolCallId":"` + callID + `","content":"{\"city\":\"Lyon\"}"}],
		"tools":[{"name":"get_location","description":"where the device is"}]}`
	_, events = e.run(t, "alice", second)
	if !strings.Contains(texts(events, agui.TextMessageContent), "Lyon") {
		t.Fatalf("second run %+v", events)
	}
}
