package llm

import "strings"

// Continuation is reasoning that was cut short (a reasoning budget ran
// out) and must be answered from at once.
type Continuation struct {
	// Reasoning so far, exactly as the model wrote it.
	Reasoning string
}

// FollowUp is how a backend is asked for an answer after its reasoning
// was cut short.
type FollowUp string

const (
	// FollowUpContinue: the assistant message is continued. The reasoning
	// so far, closed with </think>, is the start of the model's own
	// message (vLLM's continue_final_message, SGLang's, llama.cpp's and
	// Ollama's prefill of a final assistant message), so the model goes
	// straight on with its answer.
	FollowUpContinue FollowUp = "continue"
	// FollowUpReAsk: the backend cannot continue a message (DashScope,
	// OpenRouter, AG-UI agents), so the question is asked again with
	// thinking off and the reasoning so far in the system prompt.
	FollowUpReAsk FollowUp = "re-ask"
)

// AnswerNow is req asking for the answer at once after reasoning cut short,
// keeping that reasoning: each backend encodes it its own way (see
// FollowUp). Messages stay the conversation as it was; the follow-up
// message, if any, is the backend's to add.
func AnswerNow(req *Request, reasoning string) *Request {
	r := *req
	r.Continue = &Continuation{Reasoning: reasoning}
	return &r
}

// FollowUpOf tells how c asks for an answer after reasoning cut short.
func FollowUpOf(c Client) FollowUp {
	if f, ok := c.(interface{ followUp() FollowUp }); ok {
		return f.followUp()
	}
	return FollowUpReAsk
}

func (c *openAI) followUp() FollowUp {
	if c.flavor == FlavorGeneric || c.flavor == FlavorOllama {
		return FollowUpContinue
	}
	return FollowUpReAsk
}

func (c *ollamaNative) followUp() FollowUp { return FollowUpContinue }
func (c *aguiAgent) followUp() FollowUp    { return FollowUpReAsk }

// prefill is the assistant message that continues reasoning cut short: the
// reasoning, </think> and the blank line Qwen3 writes before its answer.
// The newlines around the reasoning are trimmed as Qwen3's template trims
// them, so that the prompt holds the model's own bytes whichever way the
// server delivered them (vLLM keeps the "\n" after <think>, Ollama strips
// it). opened: the server appends the message to a generation prompt
// that already opened <think> (SGLang and llama.cpp under a Thinking-2507
// or Qwen3.5 template; vLLM renders the message through the template,
// which reads it either way).
func prefill(reasoning string, opened bool) string {
	body := strings.Trim(reasoning, "\n") + "\n" + tagThinkEnd + "\n\n"
	if opened {
		return body
	}
	return tagThink + "\n" + body
}

// reAsk is req for a backend that cannot continue a message: the question
// again with thinking off, the reasoning so far given as context.
func reAsk(req *Request) *Request {
	r := *req
	r.Continue = nil
	r.Thinking = false
	note := "There is no more time to think: answer the user's last message now, without reasoning further. " +
		"Your reasoning so far, cut short:\n<reasoning>\n" + strings.Trim(req.Continue.Reasoning, "\n") + "\n</reasoning>"
	if r.System != "" {
		note = r.System + "\n\n" + note
	}
	r.System = note
	return &r
}

// followUpRequest is the request a backend actually sends for req.
func followUpRequest(req *Request, f FollowUp) *Request {
	if req.Continue != nil && f == FollowUpReAsk {
		return reAsk(req)
	}
	return req
}
