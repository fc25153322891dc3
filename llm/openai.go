package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"strings"

	"github.com/alicia-voice/alicia/internal/provider"
	"github.com/alicia-voice/alicia/llm/chunk"
)

// Flavor is the kind of OpenAI-compatible server, which decides how the
// thinking switch and Qwen3's sampling extras are sent.
type Flavor string

const (
	// FlavorGeneric: vLLM, SGLang, llama.cpp (chat_template_kwargs,
	// top-level top_k and min_p).
	FlavorGeneric    Flavor = "generic"
	FlavorDashScope  Flavor = "dashscope"
	FlavorOllama     Flavor = "ollama"
	FlavorOpenRouter Flavor = "openrouter"
)

type openAI struct {
	http   httpBackend
	model  string
	flavor Flavor
	know   *modelKnowledge
}

type oaRequest struct {
	Model         string         `json:"model"`
	Messages      []oaMessage    `json:"messages"`
	Tools         []oaTool       `json:"tools,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions map[string]any `json:"stream_options,omitempty"`
	Temperature   float64        `json:"temperature"`
	TopP          float64        `json:"top_p"`
	TopK          int            `json:"top_k,omitempty"`
	MinP          *float64       `json:"min_p,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	// Thinking switches, one per flavor.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitempty"`
	EnableThinking     *bool          `json:"enable_thinking,omitempty"`
	ReasoningEffort    string         `json:"reasoning_effort,omitempty"`
	Reasoning          map[string]any `json:"reasoning,omitempty"`
	// Continuing the final assistant message: vLLM needs both, SGLang
	// the first; llama.cpp continues any final assistant message.
	ContinueFinalMessage bool  `json:"continue_final_message,omitempty"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt,omitempty"`
}

type oaMessage struct {
	Role       string       `json:"role"`
	Content    string       `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

func (c *openAI) request(req *Request) *oaRequest {
	s := req.sampling()
	r := &oaRequest{
		Model:         c.model,
		Stream:        true,
		StreamOptions: map[string]any{"include_usage": true},
		Temperature:   s.Temperature,
		TopP:          s.TopP,
		MaxTokens:     req.MaxTokens,
	}
	// A continuation's prompt already holds the closed reasoning: what
	// follows is answer, which the thinking switch being off tells the
	// server's reasoning parser (and llama.cpp refuses a prefill with
	// thinking on).
	thinking := req.Thinking && req.Continue == nil
	switch c.flavor {
	case FlavorDashScope:
		r.EnableThinking = &thinking
		r.TopK = s.TopK
	case FlavorOllama:
		// Thinking is on by default since Ollama 0.12.4; "none" turns it
		// off. top_k and min_p are ignored on /v1, so not sent.
		if !thinking {
			r.ReasoningEffort = "none"
		}
	case FlavorOpenRouter:
		r.Reasoning = map[string]any{"enabled": thinking}
		r.TopK, r.MinP = s.TopK, &s.MinP
	default:
		r.ChatTemplateKwargs = map[string]any{"enable_thinking": thinking}
		r.TopK, r.MinP = s.TopK, &s.MinP
	}
	// Servers that render Qwen3's template re-insert a <think> block they
	// find inline in the content of the current tool loop; Ollama,
	// DashScope and OpenRouter get no reasoning back at all.
	inlineReasoning := c.flavor == FlavorGeneric
	for _, m := range history(req) {
		om := oaMessage{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		if m.Reasoning != "" && inlineReasoning {
			om.Content = tagThink + "\n" + strings.TrimSpace(m.Reasoning) + "\n" + tagThinkEnd + "\n\n" + m.Content
		}
		for _, tc := range m.ToolCalls {
			var otc oaToolCall
			otc.ID, otc.Type = tc.ID, "function"
			otc.Function.Name, otc.Function.Arguments = tc.Name, tc.Arguments
			om.ToolCalls = append(om.ToolCalls, otc)
		}
		r.Messages = append(r.Messages, om)
	}
	if req.Continue != nil {
		// Ollama's template writes the message as it is; the other
		// servers either render it through Qwen3's template (vLLM) or
		// append it to the generation prompt (SGLang, llama.cpp), which
		// opened <think> already for a template that opens it.
		opened := c.flavor == FlavorGeneric && c.know.get() == thinkOpens
		r.Messages = append(r.Messages, oaMessage{Role: string(RoleAssistant), Content: prefill(req.Continue.Reasoning, opened)})
		if c.flavor == FlavorGeneric {
			no := false
			r.ContinueFinalMessage, r.AddGenerationPrompt = true, &no
		}
	}
	r.Tools = oaTools(req.Tools)
	return r
}

func oaTools(tools []Tool) []oaTool {
	var out []oaTool
	for _, t := range tools {
		var ot oaTool
		ot.Type = "function"
		ot.Function.Name, ot.Function.Description = t.Name, t.Description
		ot.Function.Parameters = json.RawMessage(t.Parameters)
		out = append(out, ot)
	}
	return out
}

// history applies Qwen3's rule for what the model sees again: the system
// prompt, then every message, but an assistant message before the last
// user message carries its answer only (no reasoning, no inline <think>
// block). AG-UI reasoning messages are for AG-UI backends only.
func history(req *Request) []Message {
	lastUser := -1
	for i, m := range req.Messages {
		if m.Role == RoleUser {
			lastUser = i
		}
	}
	out := make([]Message, 0, len(req.Messages)+1)
	if req.System != "" {
		out = append(out, Message{Role: RoleSystem, Content: req.System})
	}
	for i, m := range req.Messages {
		if m.Role == RoleReasoning {
			continue
		}
		if m.Role == RoleAssistant && i < lastUser {
			m.Reasoning = ""
			m.Content = stripThink(m.Content)
		}
		out = append(out, m)
	}
	return out
}

// stripThink removes an inline reasoning block (with or without its
// opening tag) from a stored answer.
func stripThink(s string) string {
	if i := strings.LastIndex(s, tagThinkEnd); i >= 0 {
		s = s[i+len(tagThinkEnd):]
	}
	return trimLeftSpace(s)
}

var doneMarker = []byte("[DONE]")

func (c *openAI) Stream(ctx context.Context, req *Request) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		c.know.ensure(ctx)
		req := followUpRequest(req, c.followUp())
		t := newTurn(req, c.know)
		post := func() (*stream, *Error) {
			return c.http.post(ctx, "/chat/completions", c.request(req), "text/event-stream")
		}
		runStream(yield, t, post, func(s *stream, drain func() bool) *Error {
			var (
				sse    = newSSEReader(s)
				acc    toolAccumulator
				finish FinishReason
				in     chunk.OpenAI
			)
			for {
				payload, isErrField, err := sse.next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return s.failure(err)
				}
				if isErrField {
					return provider.StreamError(service, payload)
				}
				if bytes.Equal(bytes.TrimSpace(payload), doneMarker) {
					break
				}
				if e := c.apply(t, &acc, &in, payload, &finish); e != nil {
					return e
				}
				if !drain() {
					return nil
				}
			}
			if finish == "" {
				// No finish_reason: the server died or a proxy cut the stream.
				return &Error{Service: service, Kind: ErrTruncated, Message: "no finish reason before the stream ended"}
			}
			acc.flush(t)
			t.finish(finish)
			return nil
		})
	}
}

// apply handles one chunk. It returns an *Error for an error reported in
// the stream.
func (c *openAI) apply(t *turn, acc *toolAccumulator, in *chunk.OpenAI, payload []byte, finish *FinishReason) *Error {
	*in = chunk.OpenAI{}
	if err := chunk.Decode(payload, in); err != nil {
		if _, _, ok := provider.ErrorFromJSON(payload); ok {
			return provider.StreamError(service, payload)
		}
		return &Error{Service: service, Kind: ErrProtocol, Message: "unreadable chunk: " + err.Error(), Cause: err}
	}
	if (len(in.Error) > 0 && string(in.Error) != "null") || in.Object == "error" {
		return provider.StreamError(service, payload)
	}
	for i := range in.Choices {
		ch := &in.Choices[i]
		if ch.Index != 0 {
			continue // n is always 1; other indexes would be another answer
		}
		d := &ch.Delta
		// vLLM in its deprecation window sends the same text in both
		// fields: take one.
		if d.ReasoningContent != nil && *d.ReasoningContent != "" {
			t.reasoningField(*d.ReasoningContent, "")
		} else if d.Reasoning != nil {
			t.reasoningField(*d.Reasoning, "")
		}
		if d.Content != nil {
			t.contentText(*d.Content)
		}
		for j := range d.ToolCalls {
			acc.add(&d.ToolCalls[j])
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			if *ch.FinishReason == "error" {
				return &Error{Service: service, Kind: ErrMidStream, Message: "the backend ended the answer with an error"}
			}
			if *finish == "" { // OpenRouter repeats it on the usage chunk
				*finish = FinishReason(*ch.FinishReason)
			}
		}
	}
	if u := in.Usage; u != nil {
		usage := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
		if u.CompletionTokensDetails != nil {
			usage.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
		}
		t.setUsage(usage)
	}
	return nil
}
