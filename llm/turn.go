package llm

import (
	"strings"
)

// turn turns what a backend streams (reasoning-field text, content text,
// tool calls, a finish) into Events, applying the rules every backend
// shares. Backends feed it and drain pending after each frame.
type turn struct {
	thinking bool
	// explicitReasoning: the backend labels reasoning itself (AG-UI), so
	// none of it is a misfiled answer.
	explicitReasoning bool
	// continued: the prompt ends with the model's closed reasoning
	// (AnswerNow), so all it writes is answer. Servers whose parser
	// assumes output starts inside <think> file it as reasoning (vLLM's
	// newest qwen3 parser, Ollama's for a thinking-only prefill).
	continued bool

	content   splitter
	reasoning splitter // for reasoning-field text
	// sawReasoningField: the server parses reasoning itself, so reasoning
	// it also leaves inline in content (llama.cpp's deepseek-legacy) is a
	// duplicate.
	sawReasoningField bool

	// heldReasoning is reasoning-field text received while thinking was
	// off: vLLM's deepseek_r1 parser then puts the whole answer there, so
	// it is reasoning only if an answer or tool call follows.
	heldReasoning []Event

	// know is what the client knows of its model's template. While it
	// is unknown the answer is tentative: text is held in heldAnswer
	// until a tag or the end of the turn tells whether it was reasoning.
	know       *modelKnowledge
	tentative  bool
	heldAnswer strings.Builder

	answerStarted bool
	// said is the answer text given out since the response began or the
	// last retraction: what a bare </think> takes back.
	said strings.Builder
	// reasoningOut: reasoning went out and nothing has ended it yet;
	// reasoningID is its message.
	reasoningOut bool
	reasoningID  string
	calls        []ToolCall
	usage        *Usage
	pending      []Event
	scratch      []piece
}

func newTurn(req *Request, know *modelKnowledge) *turn {
	t := &turn{thinking: req.Thinking, know: know}
	t.reasoning.reasoningOnly = true
	switch know.assume(req.Thinking) {
	case thinkOpens:
		// Qwen3 Thinking-2507 and Qwen3.5 templates open <think> in
		// the prompt, so raw output has only the closing tag.
		t.content.mode = modeReasoning
	case thinkUnknown:
		t.tentative = true
	}
	if req.Continue != nil {
		t.continued, t.tentative = true, false
		t.content.mode = modeAnswer
	}
	return t
}

// decide ends a tentative answer: the held text was the answer, or it was
// reasoning before a bare </think>.
func (t *turn) decide(wasReasoning bool) {
	if !t.tentative {
		return
	}
	t.tentative = false
	held := t.heldAnswer.String()
	t.heldAnswer.Reset()
	if held == "" {
		return
	}
	if wasReasoning {
		t.pending = append(t.pending, Event{Kind: EventReasoning, Text: held})
		t.reasoningOut, t.reasoningID = true, ""
		// The real answer starts after </think>, with its own "\n\n".
		t.answerStarted = false
		return
	}
	t.said.WriteString(held)
	t.pending = append(t.pending, Event{Kind: EventText, Text: held})
}

// opensThinkInPrompt reports the models whose chat template ends the
// prompt with "<think>\n": they always think, and raw output carries only
// "</think>".
func opensThinkInPrompt(model string) bool {
	m := strings.ToLower(model)
	return strings.Contains(m, "thinking") || strings.Contains(m, "qwen3.5") || strings.Contains(m, "qwen3-5")
}

func (t *turn) reasoningField(text, messageID string) {
	if text == "" {
		return
	}
	if t.continued {
		t.contentText(text)
		return
	}
	if !t.sawReasoningField {
		t.sawReasoningField = true
		// A parsing server splits reasoning itself: its content is answer.
		t.decide(false)
		if !t.content.fed {
			// A parsing server: content is answer, whatever the model.
			t.content.mode = modeAnswer
		}
	}
	t.scratch = t.reasoning.feed(text, t.scratch[:0])
	t.apply(t.scratch, messageID, true)
}

func (t *turn) contentText(text string) {
	t.scratch = t.content.feed(text, t.scratch[:0])
	t.apply(t.scratch, "", false)
}

func (t *turn) apply(pieces []piece, messageID string, fromField bool) {
	for _, p := range pieces {
		switch p.kind {
		case pieceReasoning:
			if !fromField && t.sawReasoningField {
				continue
			}
			ev := Event{Kind: EventReasoning, Text: p.text, MessageID: messageID}
			if fromField && !t.thinking && !t.explicitReasoning && !t.answerStarted {
				t.heldReasoning = append(t.heldReasoning, ev)
				continue
			}
			t.pending = append(t.pending, ev)
			t.reasoningOut, t.reasoningID = true, messageID
		case pieceText:
			t.text(p.text)
		case pieceToolCall:
			t.toolCall(p.call)
		case pieceOpenTag:
			t.know.observe(thinkPlain)
			t.decide(false)
		case pieceBareClose:
			// Proof that the template opened the thinking this time,
			// whatever the model's name, the backend or earlier turns said.
			t.know.observe(thinkOpens)
			if t.tentative {
				t.decide(true)
			} else {
				t.retract()
			}
		}
	}
}

func (t *turn) text(s string) {
	if !t.answerStarted {
		// Answers start with "\n\n" after </think>, and vLLM sends a
		// whitespace delta before tool calls: never speak whitespace.
		s = trimLeftSpace(s)
		if s == "" {
			if t.reasoningOut && !t.tentative {
				// The "\n\n" after </think> is the first sign that the
				// reasoning is over: its last step is complete now, a token
				// before the answer's first word says so.
				t.reasoningEnd(t.reasoningID)
			}
			return
		}
		t.releaseHeld()
		t.answerStarted = true
	}
	if t.tentative {
		t.heldAnswer.WriteString(s)
		return
	}
	t.said.WriteString(s)
	t.pending = append(t.pending, Event{Kind: EventText, Text: s})
}

// retract takes back the answer given out so far: it was reasoning,
// streamed before the bare </think> that proves it. Only this path pays
// for the mistake; an answer without the tag streams as it comes.
func (t *turn) retract() {
	// The real answer starts after </think>, with its own "\n\n".
	t.answerStarted = false
	if t.said.Len() == 0 {
		return
	}
	said := t.said.String()
	t.said.Reset()
	t.pending = append(t.pending, Event{Kind: EventRetract, Text: said})
	if t.sawReasoningField {
		return // the server gave the reasoning in its field already
	}
	t.pending = append(t.pending, Event{Kind: EventReasoning, Text: said})
	t.reasoningOut, t.reasoningID = true, ""
}

func (t *turn) reasoningEnd(messageID string) {
	t.pending = append(t.pending, Event{Kind: EventReasoningEnd, MessageID: messageID})
	t.reasoningOut = false
}

func (t *turn) encrypted(messageID, value string) {
	t.pending = append(t.pending, Event{Kind: EventEncrypted, MessageID: messageID, Encrypted: value})
}

func (t *turn) releaseHeld() {
	t.pending = append(t.pending, t.heldReasoning...)
	t.heldReasoning = nil
}

func (t *turn) toolCall(c ToolCall) {
	if c.ID == "" {
		c.ID = newCallID()
	}
	t.releaseHeld()
	t.calls = append(t.calls, c)
}

func (t *turn) setUsage(u Usage) { t.usage = &u }

// flush releases what the splitters still hold, as at the end of the
// model's output.
func (t *turn) flush() {
	t.scratch = t.reasoning.end(t.scratch[:0])
	t.apply(t.scratch, "", true)
	t.scratch = t.content.end(t.scratch[:0])
	t.apply(t.scratch, "", false)
	if len(t.heldReasoning) > 0 && len(t.calls) == 0 && !t.answerStarted {
		// Thinking was off and nothing but "reasoning" came: it is the
		// answer, misfiled by the server's parser.
		held := t.heldReasoning
		t.heldReasoning = nil
		for _, ev := range held {
			t.text(ev.Text)
		}
	}
}

// finish ends the turn: held text, tool calls, usage, then the finish.
func (t *turn) finish(reason FinishReason) {
	t.flush()
	if t.tentative && t.heldAnswer.Len() > 0 && reason != FinishLength && reason != FinishContentFilter {
		// A model that opens its thinking in the template always closes
		// it before it finishes: a whole turn without </think> is an
		// answer, and this model's template does not open <think>.
		t.know.observe(thinkPlain)
	}
	// A turn cut short before any </think> may have been reasoning: it is
	// not spoken as an answer.
	t.decide(reason == FinishLength || reason == FinishContentFilter)
	for i := range t.calls {
		t.pending = append(t.pending, Event{Kind: EventToolCall, ToolCall: &t.calls[i]})
	}
	if t.usage != nil {
		t.pending = append(t.pending, Event{Kind: EventUsage, Usage: t.usage})
	}
	if reason == "" || (reason == FinishStop && len(t.calls) > 0) {
		reason = FinishStop
		if len(t.calls) > 0 {
			reason = FinishToolCalls
		}
	}
	t.pending = append(t.pending, Event{Kind: EventFinish, Finish: reason})
}

// fail ends the turn with an error, after releasing the text already
// received (a caller keeps what was said). Unfinished tool calls are
// dropped: running half a call would be wrong.
func (t *turn) fail(err *Error) {
	t.flush()
	t.decide(true)
	t.pending = append(t.pending, Event{Kind: EventError, Err: err})
}

// drain hands pending events to yield and reports whether the consumer
// wants more.
func (t *turn) drain(yield func(Event) bool) bool {
	for i, ev := range t.pending {
		if !yield(ev) {
			t.pending = t.pending[:0]
			return false
		}
		t.pending[i] = Event{}
	}
	t.pending = t.pending[:0]
	return true
}
