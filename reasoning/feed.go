package reasoning

import (
	"time"

	"github.com/alicia-voice/alicia/llm"
)

// Feed applies one event of the model's stream: reasoning grows the
// chain, answer text, a tool call or the end of the output end the
// reasoning phase. Other events leave it alone.
func (c *Chain) Feed(ev llm.Event, now time.Time) {
	switch ev.Kind {
	case llm.EventReasoning:
		c.Reasoning(ev.Text, ev.MessageID, now)
	case llm.EventReasoningEnd:
		c.EndMessage(ev.MessageID, now)
	case llm.EventEncrypted:
		c.Encrypted(ev.MessageID, ev.Encrypted, now)
	case llm.EventText:
		if ev.Text != "" {
			c.End(now)
		}
	case llm.EventToolCall:
		c.ToolCall(ev.ToolCall.ID, now)
	case llm.EventFinish, llm.EventError:
		c.End(now)
	}
}
