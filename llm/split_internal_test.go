package llm

import (
	"strings"
	"testing"
)

// feedAll runs text through a turn in the given pieces and returns the
// coalesced reasoning, answer and tool calls.
func feedAll(parts []string, forcedOpen bool) (reasoning, answer string, calls []string) {
	t := newTurn(&Request{Thinking: true}, newModelKnowledge(forcedOpen, "Qwen3-8B", nil))
	for _, p := range parts {
		t.contentText(p)
	}
	t.finish("")
	var r, a strings.Builder
	for _, ev := range t.pending {
		switch ev.Kind {
		case EventReasoning:
			r.WriteString(ev.Text)
		case EventText:
			a.WriteString(ev.Text)
		case EventToolCall:
			calls = append(calls, ev.ToolCall.Name+" "+ev.ToolCall.Arguments)
		}
	}
	return r.String(), a.String(), calls
}

// Inline tags split across deltas at any byte (E1), with text that only
// looks like tags, a tool call in raw markup (E9), and the reasoning of a
// Thinking-2507 model that has only the closing tag (E3).
func TestSplitterAtEveryPairOfCuts(t *testing.T) {
	cases := []struct {
		name       string
		raw        string
		forcedOpen bool
		reasoning  string
		answer     string
		calls      []string
	}{
		{
			name:      "hybrid",
			raw:       "<think>\nIs 3<4? Yes. A <b>tag</b> is not </thin k.\n</think>\n\nIt is <i>true</i>.",
			reasoning: "\nIs 3<4? Yes. A <b>tag</b> is not </thin k.\n",
			answer:    "It is <i>true</i>.",
		},
		{
			name:       "closing tag only",
			raw:        "The user greets me.\n\nI greet back.\n</think>\n\nHello!",
			forcedOpen: true,
			reasoning:  "The user greets me.\n\nI greet back.\n",
			answer:     "Hello!",
		},
		{
			name:      "raw tool call after thinking",
			raw:       "<think>\nCall it.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call>",
			reasoning: "\nCall it.\n",
			calls:     []string{`get_weather {"city": "Lyon"}`},
		},
		{
			name:      "tool call opened inside thinking",
			raw:       "<think>\nI'll look.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
			reasoning: "\nI'll look.\n",
			calls:     []string{"f {}"},
		},
		{
			name:      "empty think block",
			raw:       "<think>\n\n</think>\n\nSure.",
			reasoning: "\n\n",
			answer:    "Sure.",
		},
		{
			name:      "a partial tag at the very end is text",
			raw:       "Look: </thi",
			answer:    "Look: </thi",
			reasoning: "",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.raw)
			for i := 0; i <= n; i++ {
				for j := i; j <= n; j++ {
					r, a, calls := feedAll([]string{c.raw[:i], c.raw[i:j], c.raw[j:]}, c.forcedOpen)
					if r != c.reasoning || a != c.answer || strings.Join(calls, "|") != strings.Join(c.calls, "|") {
						t.Fatalf("cut at %d,%d:\nreasoning %q (want %q)\nanswer %q (want %q)\ncalls %q (want %q)",
							i, j, r, c.reasoning, a, c.answer, calls, c.calls)
					}
				}
			}
		})
	}
}
