package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/alicia-voice/alicia/internal/testenv"
)

// Two alicia serve processes on one database: a user's show-reasoning
// choice made through one is what the other serves from then on, though
// the other had read (and cached) the old one.
func TestPreferencesSharedByTwoServeProcesses(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	db := testenv.Database(t)
	bin := testenv.AliciaBinary(t)
	env := []string{"ALICIA_LIVEKIT_URL=" + lk.URL, "ALICIA_LIVEKIT_API_KEY=" + lk.APIKey, "ALICIA_LIVEKIT_API_SECRET=" + lk.APISecret,
		"ALICIA_DATABASE_URL=" + db, "ALICIA_VOICE=off", "ALICIA_REASONING_DEFAULT=full"}
	api := func(out *testenv.LogBuffer) string {
		return waitFor(t, out, "the HTTP address", regexp.MustCompile(`HTTP API on (http://\S+)`))[1]
	}
	_, outA := runServeProcess(t, bin, env...)
	_, outB := runServeProcess(t, bin, env...)
	a, b := api(outA), api(outB)

	token, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("alice").SetValidFor(time.Hour).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, base string, body any) string {
		t.Helper()
		var rd bytes.Buffer
		if body != nil {
			_ = json.NewEncoder(&rd).Encode(body)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, base+"/v1/preferences", &rd)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct {
			Reasoning string `json:"reasoning"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s/v1/preferences: HTTP %d, %v", method, base, resp.StatusCode, err)
		}
		return got.Reasoning
	}

	if got := call("GET", b, nil); got != "full" {
		t.Fatalf("B before any choice: %q, want the operator's default full", got)
	}
	for _, step := range []struct{ set, via, read string }{{"summary", a, b}, {"off", b, a}, {"full", a, b}} {
		if got := call("PUT", step.via, map[string]string{"reasoning": step.set}); got != step.set {
			t.Fatalf("PUT %s answered %q", step.set, got)
		}
		testenv.Eventually(t, fmt.Sprintf("the other process to serve %q", step.set), func() bool { return call("GET", step.read, nil) == step.set })
	}
}
