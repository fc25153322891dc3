package reasoning_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/wire/agui"
)

// AG-UI input (an AG-UI agent's reasoning events, in each of the three
// spellings agents use) → steps → AG-UI output: the text comes back
// whole, one reasoning message per step with the step's id, the
// encrypted value on it, and the stream passes the client's rules.
func TestAGUIInThroughStepsToAGUIOut(t *testing.T) {
	paragraphs := []string{"The user wants the weather in Lyon.", "I should call the forecast tool.", "Celsius, since they are in France."}
	s, _ := standin.New([]standin.Scenario{{Name: "w", Rounds: []standin.Round{{
		Reasoning: paragraphs, Encrypted: "opaque-blob", Answer: "Sunny."}}}}, standin.Pacing{}, nil)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for _, profile := range []string{"agui", "agui-chunks", "agui-thinking"} {
		t.Run(profile, func(t *testing.T) {
			client, _ := llm.New(llm.Config{Backend: "agui", URL: ts.URL + "/" + profile + "/agui"})
			out := []agui.Event{{Type: agui.RunStarted, ThreadID: "t", RunID: "r"}}
			var sealed []reasoning.Step
			chain := reasoning.NewChain("conv", "msg_u", "msg_a",
				reasoning.NewAGUIEvents(reasoning.ModeFull, func(e agui.Event) { out = append(out, e) }),
				reasoning.OnSealed(func(s reasoning.Step) { sealed = append(sealed, s) }))
			for ev := range client.Stream(context.Background(), &llm.Request{ConversationID: "conv", Thinking: true,
				Messages: []llm.Message{{Role: llm.RoleUser, Content: "weather?"}}}) {
				chain.Feed(ev, time.Now())
			}
			out = append(out, agui.Event{Type: agui.RunFinished, ThreadID: "t", RunID: "r"})
			if err := agui.CheckAll(out); err != nil {
				t.Fatal(err)
			}
			texts := map[string]string{}
			var order []string
			encrypted := map[string]string{}
			for _, e := range out {
				switch e.Type {
				case agui.ReasoningMessageStart:
					order = append(order, e.MessageID)
				case agui.ReasoningMessageContent:
					texts[e.MessageID] += e.Delta
				case agui.ReasoningEncryptedValue:
					encrypted[e.EntityID] = e.EncryptedValue
				}
			}
			steps := chain.Steps()
			if len(steps) != len(paragraphs) || len(order) != len(steps) {
				t.Fatalf("%d steps, %d AG-UI messages, want %d", len(steps), len(order), len(paragraphs))
			}
			var joined []string
			for i, st := range steps {
				if order[i] != st.ID || texts[st.ID] != st.Content {
					t.Fatalf("message %d: id %s text %q; step id %s text %q", i, order[i], texts[order[i]], st.ID, st.Content)
				}
				joined = append(joined, texts[st.ID])
			}
			if strings.Join(joined, "\n\n") != strings.Join(paragraphs, "\n\n") {
				t.Fatalf("text came back as %q", joined)
			}
			if profile != "agui-thinking" { // THINKING_* has no encrypted values
				last := steps[len(steps)-1]
				if last.EncryptedValue != "opaque-blob" || encrypted[last.ID] != "opaque-blob" || sealed[len(sealed)-1].EncryptedValue != "opaque-blob" {
					t.Fatalf("encrypted value: step %q, AG-UI %v, stored %q", last.EncryptedValue, encrypted, sealed[len(sealed)-1].EncryptedValue)
				}
			}
		})
	}
}
