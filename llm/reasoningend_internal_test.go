package llm

import (
	"slices"
	"testing"
)

// The blank line a parsing server sends as content after the reasoning
// ends the reasoning then, a token before the answer's first word, for
// the answer and for tool calls alike; it is never part of the answer.
func TestBlankContentAfterReasoningEndsIt(t *testing.T) {
	kinds := func(tr *turn) []string {
		var out []string
		for _, ev := range tr.pending {
			out = append(out, ev.Kind.String()+" "+ev.Text)
		}
		return out
	}
	answer := newTurn(&Request{Thinking: true}, newModelKnowledge(false, "Qwen3-8B", nil))
	answer.reasoningField("First I look.\n\n", "")
	answer.reasoningField("Then I answer.", "")
	answer.contentText("\n\n")
	if got := kinds(answer); got[len(got)-1] != "reasoning-end " {
		t.Fatalf("after the blank content: %q, want the reasoning ended", got)
	}
	answer.contentText("Hello")
	got := kinds(answer)
	if want := []string{"reasoning First I look.\n\n", "reasoning Then I answer.", "reasoning-end ", "text Hello"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}

	// No reasoning, no end: a blank first delta of a plain answer, or of
	// a turn with thinking off, says nothing.
	plain := newTurn(&Request{Thinking: false}, newModelKnowledge(false, "Qwen3-8B", nil))
	plain.contentText("\n\n")
	plain.contentText("Hi")
	if got := kinds(plain); slices.Contains(got, "reasoning-end ") {
		t.Fatalf("events %q: a reasoning end without reasoning", got)
	}
}
