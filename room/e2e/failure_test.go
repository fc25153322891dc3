package e2e

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// A model failure mid-answer, in every way the stand-in fails: the user
// gets a recoverable ErrorMessage with the reason in plain words, keeps
// the sentences already said (the last marked final), and the
// conversation goes on.
func TestBackendFailureMidAnswer(t *testing.T) {
	faults := map[string]standin.Fault{
		"error":     {Kind: "error", AfterTokens: 30, Message: "CUDA out of memory"},
		"cut":       {Kind: "cut", AfterTokens: 30},
		"no-finish": {Kind: "no-finish", AfterTokens: 30},
		"http":      {Kind: "http", Status: 503, Message: "model is loading"},
		"html":      {Kind: "html"},
		"stall":     {Kind: "stall", AfterTokens: 30, StallMs: 1500},
	}
	var scenarios []standin.Scenario
	for name, f := range faults {
		scenarios = append(scenarios, standin.Scenario{Name: name, Match: "^fail " + name + "$", Rounds: []standin.Round{{
			Reasoning: []string{"Short."}, Answer: "First sentence is here. Second sentence is here. Third sentence is here. Fourth one. Fifth one.", Fault: &f}}})
	}
	lk := testenv.StartLiveKit(t)
	s, _ := standin.New(scenarios, standin.Pacing{}, nil)
	model := httptest.NewServer(s.Handler())
	defer model.Close()
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B", IdleTimeout: 500 * time.Millisecond})
	cfg := startAgent(t, lk, client, storage.NewMemory(storage.ReasoningPlain))
	u := join(t, lk, cfg, "conv_fail", "alice")
	u.greeted()
	u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
	for name, f := range faults {
		u.mu.Lock()
		u.got = nil
		u.mu.Unlock()
		u.send(&wire.UserMessage{ID: "msg_" + name, ConversationID: "conv_fail", Content: "fail " + name})
		got := u.until(name+": an error", func(g []*wire.Envelope) bool { return len(bodies[*wire.ErrorMessage](g)) > 0 })
		em := bodies[*wire.ErrorMessage](got)[0]
		if !em.Recoverable || em.Code != wire.CodeServiceUnavailable || em.OriginatingID != "msg_"+name {
			t.Errorf("%s: %+v", name, em)
		}
		if f.Message != "" && !strings.Contains(em.Message, f.Message) {
			t.Errorf("%s: %q does not give the backend's reason %q", name, em.Message, f.Message)
		}
		sentences := bodies[*wire.AssistantSentence](got)
		if f.AfterTokens > 0 && f.Kind != "stall" {
			if len(sentences) == 0 || !sentences[len(sentences)-1].IsFinal || !strings.HasPrefix(answerText(got), "First sentence is here.") {
				t.Errorf("%s: what was said is not kept: %q", name, answerText(got))
			}
		}
	}
	// And the conversation goes on.
	u.send(&wire.UserMessage{ID: "msg_after", ConversationID: "conv_fail", Content: "still there?"})
	u.until("an answer after the failures", func(g []*wire.Envelope) bool { return strings.Contains(answerText(g), "still there?") })
}
