package e2e

import (
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// The tides scenario of pipeline's retraction tests: a model that reasons
// inline, then (routed to a Thinking-2507 deployment) behind a bare </think>.
const routedAnswer = "Tides come from the pull of the moon and the sun."

var tideScenario = standin.Scenario{Name: "tides", Match: "(?i)tide", Rounds: []standin.Round{{
	Reasoning: []string{"The user asks about the tides. The moon pulls the sea, and so does the sun.", "I will say so in one sentence."},
	Answer:    routedAnswer,
}}}

// Over a real livekit-server: a client in the room receives the
// retraction for every sentence of reasoning it was sent as answer, and
// the answer itself stays.
func TestBareThinkEndRetractionReachesTheRoom(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	model := testenv.NewRoutedModel(t, tideScenario)
	client, err := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm-noparser/v1", Model: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := startAgent(t, lk, client, storage.NewMemory(storage.ReasoningPlain))
	alice := join(t, lk, cfg, "conv_routed_room", "alice")
	alice.greeted()
	alice.send(&wire.Configuration{Features: []string{wire.FeatureStreaming, wire.FeatureReasoningSteps}})
	alice.until("configured", func(g []*wire.Envelope) bool { return has[*wire.Configuration](g) > 1 })

	finals := func(n int) func([]*wire.Envelope) bool {
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
	alice.send(&wire.UserMessage{ID: "msg_r1", ConversationID: "conv_routed_room", Content: "Why are there tides?"})
	alice.until("the first answer", finals(1))
	model.Thinking.Store(true)
	alice.send(&wire.UserMessage{ID: "msg_r2", ConversationID: "conv_routed_room", Content: "And the tide tables?"})
	got := alice.until("the second answer", finals(2))

	var start *wire.StartAnswer
	for _, e := range got {
		if b, ok := e.Body.(*wire.StartAnswer); ok && b.PreviousID == "msg_r2" {
			start = b
		}
	}
	if start == nil {
		t.Fatal("no StartAnswer for the second question")
	}
	texts := map[string]string{}
	var order []string
	retracted := map[string]bool{}
	for _, e := range got {
		switch b := e.Body.(type) {
		case *wire.AssistantSentence:
			if b.PreviousID == start.ID {
				texts[b.ID] = b.Text
				order = append(order, b.ID)
			}
		case *wire.Acknowledgement:
			if b.Notes == pipeline.NoteRetracted {
				if _, ok := texts[b.AcknowledgedMessageID]; !ok {
					t.Fatalf("retraction of %s, not a sentence of the answer received before it", b.AcknowledgedMessageID)
				}
				retracted[b.AcknowledgedMessageID] = true
			}
		}
	}
	if len(retracted) == 0 {
		t.Fatalf("nothing retracted of %q", texts)
	}
	var kept []string
	for _, id := range order {
		if !retracted[id] && texts[id] != "" {
			kept = append(kept, texts[id])
		}
	}
	if strings.Join(kept, " ") != routedAnswer {
		t.Fatalf("the client is left with %q", kept)
	}
}
