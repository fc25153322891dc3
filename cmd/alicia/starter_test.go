package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
)

// The reasoning the stock clients are shown: two steps, the first of two
// sentences so that its summary is shorter than it.
var starterReasoning = []string{
	"The user asks what a lighthouse is for. It warns ships away from rocks and marks the coast at night.",
	"I will answer in one short sentence.",
}

const starterQuestion = "What is a lighthouse for?"

var starterScenarios = []standin.Scenario{{
	Name:   "lighthouse",
	Match:  "(?i)lighthouse",
	Rounds: []standin.Round{{Reasoning: starterReasoning, Answer: "A lighthouse warns ships away from the rocks."}},
}}

// starterServer runs alicia serve as a LiveKit agent beside a
// livekit-server of the test's, with the stand-in model thinking
// starterReasoning and the speech stand-ins (a stock client reads the
// answer as its spoken transcript), and returns that livekit-server and
// the address of serve's HTTP API.
// args are more flags for alicia serve.
func starterServer(t *testing.T, args ...string) (*testenv.LiveKit, string) {
	t.Helper()
	lk := testenv.StartLiveKit(t)
	base, srv, ln, err := standinServer("127.0.0.1:0", starterScenarios, standin.Pacing{TTFTMs: 50, TokenMs: 25}, nil, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port, err := lkserver.FreePort("tcp")
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for k, v := range map[string]string{"ALICIA_LIVEKIT_URL": lk.URL, "ALICIA_LIVEKIT_API_KEY": lk.APIKey, "ALICIA_LIVEKIT_API_SECRET": lk.APISecret,
		"ALICIA_HTTP_ADDR": addr, "ALICIA_DATABASE_URL": "", "ALICIA_TOKEN_SECRET": "",
		"ALICIA_STT_URL": "", "ALICIA_TTS_URL": "", "ALICIA_VOICE": "on",
		"ALICIA_LLM_URL": base + "/vllm/v1", "ALICIA_LLM_MODEL": "Qwen3-8B", "ALICIA_LLM_BACKEND": "openai"} {
		t.Setenv(k, v)
	}
	serveForTest(t, args...)
	return lk, addr
}

// serveForTest runs alicia serve with args until the test ends and
// returns its standard output; its log is shown when the test failed.
func serveForTest(t *testing.T, args ...string) *testenv.LogBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut testenv.LogBuffer
	served := make(chan error, 1)
	go func() { served <- runServe(ctx, args, nil, &out, &errOut) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		if t.Failed() {
			t.Logf("alicia serve log:\n%s", errOut.String())
		}
	})
	return &out
}

// starterToken mints what a starter's token route mints: a token for the
// room whose configuration dispatches the agent, with attrs.
func starterToken(t *testing.T, lk *testenv.LiveKit, roomName, identity string, attrs map[string]string) string {
	t.Helper()
	tok, err := room.UserToken(room.Config{APIKey: lk.APIKey, APISecret: lk.APISecret}, roomName, identity, identity, attrs)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// putPreference sets the preference of the user whose token tok is, as
// an app's settings screen would.
func putPreference(t *testing.T, api, tok string, m reasoning.Mode) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, "http://"+api+"/v1/preferences", strings.NewReader(`{"reasoning":"`+string(m)+`"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
			t.Fatalf("PUT /v1/preferences: %s", res.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUT /v1/preferences: %v", err)
		}
		// serve is still starting
		time.Sleep(100 * time.Millisecond)
	}
}

type readStream struct {
	From       string            `json:"from"`
	Attributes map[string]string `json:"attributes"`
	Text       string            `json:"text"`
	Closed     bool              `json:"closed"`
}

// starterSteps is what a client shown starterReasoning at mode reads.
func starterSteps(mode reasoning.Mode) []string {
	var want []string
	switch mode {
	case reasoning.ModeFull:
		want = starterReasoning
	case reasoning.ModeSummary:
		for _, s := range starterReasoning {
			want = append(want, reasoning.Summarize(s))
		}
	}
	return want
}

// checkStreams says what is wrong with the reasoning streams one user
// read for an answer, at level mode.
func checkStreams(streams []readStream, mode reasoning.Mode) string {
	want := starterSteps(mode)
	if len(streams) != len(want) {
		return fmt.Sprintf("%d streams, want %d: %+v", len(streams), len(want), streams)
	}
	for i, s := range streams {
		a := s.Attributes
		switch {
		case s.Text != want[i]:
			return fmt.Sprintf("step %d reads %q, want %q", i+1, s.Text, want[i])
		case !s.Closed:
			return fmt.Sprintf("step %d's stream is not closed", i+1)
		case a[room.AttrStepIndex] != fmt.Sprint(i+1), a[room.AttrReasoningLevel] != string(mode),
			!strings.HasPrefix(a[room.AttrStepID], "rs"), !strings.HasPrefix(a[room.AttrPreviousID], "msg"),
			a[room.AttrAnswerID] == "", a[room.AttrCutShort] != "false":
			return fmt.Sprintf("step %d's attributes %v", i+1, a)
		}
	}
	return ""
}

// Stock clients on @livekit/rtc-node read the reasoning as text streams:
// each user at its own level, nobody whose preference is off, and no
// client that did not ask for streams. Attributes come in the tokens, as
// a token route may put them; eve set her preference through
// PUT /v1/preferences instead.
func TestReasoningStreamsRTCNode(t *testing.T) {
	lk, api := starterServer(t)
	const roomName = "starter_rtc_node"
	users := []map[string]any{}
	prefs := map[string]reasoning.Mode{"ana": reasoning.ModeFull, "ben": reasoning.ModeSummary, "cy": reasoning.ModeOff, "dee": reasoning.ModeFull, "eve": reasoning.ModeSummary}
	for _, id := range []string{"ana", "ben", "cy", "dee", "eve"} {
		attrs := map[string]string{room.AttrReasoningStreams: "1", room.AttrReasoningPreference: string(prefs[id])}
		switch id {
		case "dee": // dee's app does not read reasoning streams
			delete(attrs, room.AttrReasoningStreams)
		case "eve":
			delete(attrs, room.AttrReasoningPreference)
		}
		tok := starterToken(t, lk, roomName, id, attrs)
		if id == "eve" {
			putPreference(t, api, tok, prefs[id])
		}
		users = append(users, map[string]any{"identity": id, "token": tok, "ask": id == "ben"})
	}
	in, _ := json.Marshal(map[string]any{"url": lk.URL, "users": users, "question": starterQuestion})
	var got map[string]struct {
		Streams []readStream `json:"streams"`
		Answer  string       `json:"answer"`
	}
	out := testenv.Node(t, nil, "reasoning-rtc-node.mjs", string(in))
	// The SDK may log on stdout before the script's one line.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for id, mode := range prefs {
		if id == "dee" {
			mode = reasoning.ModeOff
		}
		if problem := checkStreams(got[id].Streams, mode); problem != "" {
			t.Errorf("%s (%s): %s", id, mode, problem)
		}
		t.Logf("%s heard %q after %d reasoning streams", id, got[id].Answer, len(got[id].Streams))
	}
	// The same answer, the same steps, for everyone who reads them.
	a, b := got["ana"].Streams, got["ben"].Streams
	for i := range min(len(a), len(b)) {
		if a[i].Attributes[room.AttrStepID] != b[i].Attributes[room.AttrStepID] || a[i].Attributes[room.AttrAnswerID] != b[i].Attributes[room.AttrAnswerID] {
			t.Errorf("step %d: %v and %v", i+1, a[i].Attributes, b[i].Attributes)
		}
	}
}
