package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"

	"github.com/alicia-voice/alicia/internal/provider"
	"github.com/alicia-voice/alicia/llm/chunk"
)

// ollamaNative speaks Ollama's own /api/chat: newline-delimited JSON, the
// think switch, message.thinking, and tool calls whose arguments are
// objects.
type ollamaNative struct {
	http  httpBackend
	model string
	know  *modelKnowledge
}

type olRequest struct {
	Model    string         `json:"model"`
	Messages []olMessage    `json:"messages"`
	Tools    []oaTool       `json:"tools,omitempty"`
	Stream   bool           `json:"stream"`
	Think    bool           `json:"think"`
	Options  map[string]any `json:"options"`
}

type olMessage struct {
	Role      string                 `json:"role"`
	Content   string                 `json:"content"`
	ToolCalls []chunk.OllamaToolCall `json:"tool_calls,omitempty"`
	ToolName  string                 `json:"tool_name,omitempty"`
}

func (c *ollamaNative) request(req *Request) *olRequest {
	s := req.sampling()
	opts := map[string]any{"temperature": s.Temperature, "top_p": s.TopP, "top_k": s.TopK, "min_p": s.MinP}
	if req.MaxTokens > 0 {
		opts["num_predict"] = req.MaxTokens
	}
	// A continuation's prompt holds the closed reasoning already; with
	// think off Ollama parses none of what follows, so the answer cannot
	// be filed as thinking.
	r := &olRequest{Model: c.model, Stream: true, Think: req.Thinking && req.Continue == nil, Options: opts}
	names := map[string]string{} // tool call id → name, for tool results
	// Ollama strips earlier reasoning itself and must never be sent
	// reasoning back, so Message.Reasoning is dropped here.
	for _, m := range history(req) {
		om := olMessage{Role: string(m.Role), Content: m.Content}
		for i, tc := range m.ToolCalls {
			names[tc.ID] = tc.Name
			var oc chunk.OllamaToolCall
			oc.ID = tc.ID
			oc.Function.Index, oc.Function.Name = i, tc.Name
			oc.Function.Arguments = json.RawMessage(tc.Arguments)
			if !json.Valid(oc.Function.Arguments) {
				oc.Function.Arguments = json.RawMessage("{}")
			}
			om.ToolCalls = append(om.ToolCalls, oc)
		}
		if m.Role == RoleTool {
			om.ToolName = names[m.ToolCallID]
		}
		r.Messages = append(r.Messages, om)
	}
	if req.Continue != nil {
		// Ollama continues a final assistant message. The reasoning goes
		// inline in its content rather than in its thinking field: some
		// paths drop a message's thinking, and a thinking-only prefill has
		// its continuation parsed as more thinking.
		r.Messages = append(r.Messages, olMessage{Role: string(RoleAssistant), Content: prefill(req.Continue.Reasoning, false)})
	}
	r.Tools = oaTools(req.Tools)
	return r
}

func (c *ollamaNative) Stream(ctx context.Context, req *Request) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		c.know.ensure(ctx)
		t := newTurn(req, c.know)
		post := func() (*stream, *Error) { return c.http.post(ctx, "/api/chat", c.request(req), "application/x-ndjson") }
		runStream(yield, t, post, func(s *stream, drain func() bool) *Error {
			r := bufio.NewReaderSize(s, 32<<10)
			var line chunk.Ollama
			for {
				raw, err := r.ReadBytes('\n')
				if len(bytes.TrimSpace(raw)) > 0 {
					line = chunk.Ollama{}
					if jerr := chunk.Decode(raw, &line); jerr != nil {
						return &Error{Service: service, Kind: ErrProtocol, Message: "unreadable line: " + jerr.Error(), Cause: jerr}
					}
					if len(line.Error) > 0 && string(line.Error) != "null" {
						return provider.StreamError(service, raw)
					}
					if m := line.Message; m != nil {
						t.reasoningField(m.Thinking, "")
						t.contentText(m.Content)
						for _, tc := range m.ToolCalls {
							t.toolCall(ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: normaliseArguments(tc.Function.Arguments)})
						}
					}
					if line.Done {
						t.setUsage(Usage{PromptTokens: line.PromptEvalCount, CompletionTokens: line.EvalCount})
						reason := FinishStop
						if line.DoneReason == "length" {
							reason = FinishLength
						}
						t.finish(reason)
						return nil
					}
					if !drain() {
						return nil
					}
				}
				if errors.Is(err, io.EOF) {
					return &Error{Service: service, Kind: ErrTruncated, Message: "the stream ended without done:true"}
				}
				if err != nil {
					return s.failure(err)
				}
			}
		})
	}
}
