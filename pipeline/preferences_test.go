package pipeline_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/pipeline"
	aguiface "github.com/alicia-voice/alicia/pipeline/agui"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire/agui"
)

// An AG-UI run shows what the user's preference says (the operator's
// default for a user who never chose); forwardedProps.reasoning overrides
// it for that run only.
func TestAGUIRunFollowsThePreference(t *testing.T) {
	store := storage.NewMemory(storage.ReasoningPlain)
	e := pipeline.NewEngine(pipeline.Config{LLM: newModel(plain), Thinking: true, ReasoningDefault: reasoning.ModeOff}, store)
	api := httptest.NewServer(aguiface.New(e, store, asCaller))
	defer api.Close()
	run := func(identity, thread, forwarded string) string {
		body := `{"threadId":"` + thread + `","runId":"r1","messages":[{"id":"u1","role":"user","content":"q"}]` + forwarded + `}`
		req, _ := http.NewRequest(http.MethodPost, api.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+identity)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var reasoningText strings.Builder
		for _, ev := range testenv.AGUIEvents(t, res.Body) {
			if ev.Type == agui.ReasoningMessageContent || ev.Type == agui.ReasoningMessageChunk {
				reasoningText.WriteString(ev.Delta)
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

// asCaller takes the bearer token for the caller's identity: the engine's
// tests need who asks, not how a LiveKit token proves it (room/e2e's do).
func asCaller(r *http.Request) (string, error) {
	id, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || id == "" {
		return "", errors.New("no caller named")
	}
	return id, nil
}
