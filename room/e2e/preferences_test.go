package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
	"github.com/livekit/protocol/auth"
)

// GET and PUT /v1/preferences reach the caller's own preference only,
// authenticated like the history endpoint by the user's LiveKit token.
func TestPreferenceAPIIsTheCallersOwn(t *testing.T) {
	const key, secret = "APIkey", "a-secret-long-enough-for-livekit-0123456789"
	store := storage.NewMemory(storage.ReasoningPlain)
	s, _ := standin.New(nil, standin.Pacing{}, nil)
	model := httptest.NewServer(s.Handler())
	defer model.Close()
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	e := pipeline.NewEngine(pipeline.Config{LLM: client, ReasoningDefault: reasoning.ModeSummary}, store)
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
