package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

func TestVariations(t *testing.T) {
	store := storage.NewMemory(storage.ReasoningPlain)
	u := startWithScenarios(t, store)("conv_vary")
	u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
	answers := func(n int) []*wire.StartAnswer {
		return bodies[*wire.StartAnswer](u.until("answer", func(g []*wire.Envelope) bool {
			finals := 0
			for _, s := range bodies[*wire.AssistantSentence](g) {
				if s.IsFinal {
					finals++
				}
			}
			return finals >= n
		}))
	}
	u.send(&wire.UserMessage{ID: "msg_1", ConversationID: "conv_vary", Content: "first question"})
	first := answers(1)[0]

	// The same message id again: acknowledged, not answered twice.
	u.send(&wire.UserMessage{ID: "msg_1", ConversationID: "conv_vary", Content: "first question"})

	u.send(&wire.ControlVariation{ConversationID: "conv_vary", TargetID: "msg_1", Mode: wire.VariationRegenerate})
	all := answers(2)
	if len(all) != 2 || all[1].ID == first.ID || all[1].PreviousID != "msg_1" {
		t.Fatalf("regenerate: answers %+v", all)
	}

	u.send(&wire.ControlVariation{ConversationID: "conv_vary", TargetID: "msg_1", Mode: wire.VariationEdit, NewContent: "an edited question"})
	all = answers(3)
	got := u.until("the edited answer", func(g []*wire.Envelope) bool { return strings.Contains(answerText(g), "an edited question") })
	if len(all) != 3 || len(bodies[*wire.ErrorMessage](got)) != 0 {
		t.Fatalf("edit: %d answers, errors %+v", len(all), bodies[*wire.ErrorMessage](got))
	}

	h, _ := store.History(context.Background(), "conv_vary")
	var summary []string
	for _, e := range h {
		summary = append(summary, e.Role+":"+e.Status+":"+e.VariantOf)
	}
	want := "user:superseded:|assistant:complete:|assistant:complete:" + first.ID + "|user:complete:|assistant:complete:"
	if strings.Join(summary, "|") != want {
		t.Fatalf("stored %s\nwant   %s", strings.Join(summary, "|"), want)
	}
	// Regenerating anything but the latest message is refused.
	u.send(&wire.ControlVariation{ConversationID: "conv_vary", TargetID: "msg_1", Mode: wire.VariationRegenerate})
	u.until("a refusal", func(g []*wire.Envelope) bool { return len(bodies[*wire.ErrorMessage](g)) > 0 })
}

// continue extends an answer that was stopped.
func TestContinueAfterStop(t *testing.T) {
	joinRoom := startWithScenarios(t, storage.NewMemory(storage.ReasoningPlain))
	u := joinRoom("conv_continue")
	u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
	u.send(&wire.UserMessage{ID: "msg_s", ConversationID: "conv_continue", Content: "tell me a long story"})
	u.until("a few sentences", func(g []*wire.Envelope) bool { return has[*wire.AssistantSentence](g) >= 3 })
	u.send(&wire.ControlStop{ConversationID: "conv_continue"})
	u.until("stopped", finalSentence)
	u.send(&wire.ControlVariation{ConversationID: "conv_continue", TargetID: "msg_s", Mode: wire.VariationContinue})
	got := u.until("a continuation", func(g []*wire.Envelope) bool {
		return has[*wire.StartAnswer](g) == 2 && has[*wire.AssistantSentence](g) > 5
	})
	starts := bodies[*wire.StartAnswer](got)
	if starts[1].PreviousID != "msg_s" || starts[1].ID == starts[0].ID {
		t.Fatalf("continuation %+v", starts)
	}
}
