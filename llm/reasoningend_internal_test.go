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

// A model whose template is not known yet: its held text turns out to be
// reasoning at a bare </think>, and the blank line after it ends it.
func TestBlankContentAfterHeldReasoningEndsIt(t *testing.T) {
	tr := newTurn(&Request{Thinking: true}, newModelKnowledge(false, "my-finetune", nil))
	for _, p := range []string{"I think it over.", "</think>", "\n\n"} {
		tr.contentText(p)
	}
	var kinds []string
	for _, ev := range tr.pending {
		kinds = append(kinds, ev.Kind.String())
	}
	if want := []string{"reasoning", "reasoning-end"}; !slices.Equal(kinds, want) {
		t.Fatalf("events %q, want %q", kinds, want)
	}
}
