package llm

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/alicia-voice/alicia/llm/chunk"
)

// toolAccumulator joins streamed tool-call fragments by index; Ollama
// sends each call whole, which is the one-fragment case.
type toolAccumulator struct {
	calls []accCall
}

type accCall struct {
	index int
	id    string
	name  string
	args  strings.Builder
}

func (a *toolAccumulator) add(d *chunk.OpenAIToolCallDelta) {
	var c *accCall
	for i := range a.calls {
		if a.calls[i].index == d.Index {
			c = &a.calls[i]
			break
		}
	}
	if c == nil {
		a.calls = append(a.calls, accCall{index: d.Index})
		c = &a.calls[len(a.calls)-1]
	}
	if d.ID != "" {
		c.id = d.ID
	}
	if d.Function.Name != "" {
		c.name = d.Function.Name
	}
	if raw := d.Function.Arguments; len(raw) > 0 && string(raw) != "null" {
		if raw[0] == '"' {
			var s string
			_ = json.Unmarshal(raw, &s)
			c.args.WriteString(s)
		} else {
			c.args.Write(raw) // a server that sends the object itself
		}
	}
}

func (a *toolAccumulator) flush(t *turn) {
	slices.SortStableFunc(a.calls, func(x, y accCall) int { return x.index - y.index })
	for i := range a.calls {
		c := &a.calls[i]
		args := strings.TrimSpace(c.args.String())
		if args == "" {
			args = "{}"
		}
		t.toolCall(ToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	a.calls = nil
}
