package pipeline_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/alicia-voice/alicia/pipeline"
	aguiface "github.com/alicia-voice/alicia/pipeline/agui"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire/agui"
)

// GET and PUT /v1/preferences reach the caller's own preference only,
// authenticated like the history endpoint by the user's LiveKit token.
func TestPreferenceAPIIsTheCallersOwn(t *testing.T) {
	const key, secret = "APIkey", "a-secret-long-enough-for-livekit-0123456789"
	store := storage.NewMemory(storage.ReasoningPlain)
	e := pipeline.NewEngine(pipeline.Config{LLM: newModel(plain), ReasoningDefault: reasoning.ModeSummary}, store)
	api := httptest.NewServer(storage.PreferenceHandler(store, room.BearerIdentity(key, secret), e.Preference, e.ReasoningDefault()))
	defer api.Close()
	token := func(identity, signedWith string) string {
		at := auth.NewAccessToken(key, signedWith).SetIdentity(identity).SetValidFor(time.Hour).SetVideoGrant(&auth.VideoGrant{RoomJoin: true})
		tok, err := at.ToJWT()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	call := func(method, tok, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, api.URL, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	alice, bob := token("alice", secret), token("bob", secret)

	if code, out := call(http.MethodGet, alice, ""); code != 200 || out["reasoning"] != "summary" || out["stored"] != false {
		t.Fatalf("alice before choosing: %d %v", code, out)
	}
	if code, out := call(http.MethodPut, alice, `{"reasoning": "off", "identity": "bob"}`); code != 200 || out["reasoning"] != "off" || out["stored"] != true {
		t.Fatalf("alice sets off: %d %v", code, out)
	}
	// Naming bob in the body changed nothing of bob's.
	if code, out := call(http.MethodGet, bob, ""); code != 200 || out["reasoning"] != "summary" || out["stored"] != false {
		t.Fatalf("bob after alice's change: %d %v", code, out)
	}
	if m, _ := store.Mode(t.Context(), "bob"); m != reasoning.ModeUnset {
		t.Fatalf("bob's stored preference: %q", m)
	}
	if code, _ := call(http.MethodPut, bob, `{"reasoning": "full"}`); code != 200 {
		t.Fatalf("bob sets full: %d", code)
	}
	if code, out := call(http.MethodGet, alice, ""); out["reasoning"] != "off" {
		t.Fatalf("alice after bob's change: %d %v", code, out)
	}
	for _, c := range []struct {
		what, method, tok, body string
		want                    int
	}{
		{"no token", http.MethodGet, "", "", http.StatusUnauthorized},
		{"a token signed with another secret", http.MethodPut, token("alice", "another-secret-long-enough-0123456789abcdef"), `{"reasoning": "full"}`, http.StatusUnauthorized},
		{"an unknown mode", http.MethodPut, alice, `{"reasoning": "loud"}`, http.StatusBadRequest},
		{"another method", http.MethodDelete, alice, "", http.StatusMethodNotAllowed},
	} {
		if code, _ := call(c.method, c.tok, c.body); code != c.want {
			t.Errorf("%s: %d, want %d", c.what, code, c.want)
		}
	}
	if m, _ := store.Mode(t.Context(), "alice"); m != reasoning.ModeOff {
		t.Fatalf("alice's preference after refused requests: %q", m)
	}
}

// An AG-UI run shows what the user's preference says (the operator's
// default for a user who never chose); forwardedProps.reasoning overrides
// it for that run only.
func TestAGUIRunFollowsThePreference(t *testing.T) {
	const key, secret = "APIkey", "a-secret-long-enough-for-livekit-0123456789"
	store := storage.NewMemory(storage.ReasoningPlain)
	e := pipeline.NewEngine(pipeline.Config{LLM: newModel(plain), Thinking: true, ReasoningDefault: reasoning.ModeOff}, store)
	api := httptest.NewServer(aguiface.New(e, store, room.BearerIdentity(key, secret)))
	defer api.Close()
	run := func(identity, thread, forwarded string) string {
		tok, _ := auth.NewAccessToken(key, secret).SetIdentity(identity).SetValidFor(time.Hour).ToJWT()
		body := `{"threadId":"` + thread + `","runId":"r1","messages":[{"id":"u1","role":"user","content":"q"}]` + forwarded + `}`
		req, _ := http.NewRequest(http.MethodPost, api.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var reasoningText strings.Builder
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev agui.Event
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatal(err)
				}
				if ev.Type == agui.ReasoningMessageContent || ev.Type == agui.ReasoningMessageChunk {
					reasoningText.WriteString(ev.Delta)
				}
			}
		}
		return reasoningText.String()
	}
	// The default (off) for a user who never chose; overridden for a run.
	if got := run("nell", "t1", ""); got != "" {
		t.Fatalf("default off: reasoning %q", got)
	}
	if got := run("nell", "t2", `,"forwardedProps":{"reasoning":"full"}`); !strings.Contains(got, "First I read the question.") {
		t.Fatalf("forwardedProps full: reasoning %q", got)
	}
	// A stored summary, as LiveKit clients would get it; the run's
	// override does not change it.
	if err := store.SetMode(t.Context(), "sam", reasoning.ModeSummary); err != nil {
		t.Fatal(err)
	}
	if got := run("sam", "t3", ""); !strings.Contains(got, reasoning.Summarize("First I read the question.")) {
		t.Fatalf("stored summary: reasoning %q", got)
	}
	if got := run("sam", "t4", `,"forwardedProps":{"reasoning":"off"}`); got != "" {
		t.Fatalf("forwardedProps off: reasoning %q", got)
	}
	if m, _ := store.Mode(t.Context(), "sam"); m != reasoning.ModeSummary {
		t.Fatalf("a run's override changed the stored preference to %q", m)
	}
}
