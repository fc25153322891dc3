// Package chunk is what the streaming backends send, one chunk at a time:
// the shapes of OpenAI's chat completion chunks (vLLM, SGLang,
// llama.cpp, DashScope, OpenRouter, Ollama's /v1), Ollama's own NDJSON
// lines and AG-UI's events, and their decoder.
//
// It is a package of its own, importing no more than a JSON decoder, so
// that fuzzing the decoder against encoding/json compiles little: fuzzing
// instruments every package of its test binary, and llm's HTTP clients
// brought in net/http and crypto/tls, seven minutes of CPU on a fresh
// machine where this takes one.
package chunk

import (
	"encoding/json"

	gojson "github.com/goccy/go-json"
)

// Decode decodes one streamed chunk into v, a pointer to one of this
// package's types: the one JSON decode a backend does per token.
// goccy/go-json decodes the same values as encoding/json
// (TestDecodeMatchesEncodingJSON, FuzzDecode) in a quarter of the time:
// at 500 streaming conversations encoding/json here was a sixth of the
// bot's CPU.
func Decode(data []byte, v any) error {
	return gojson.Unmarshal(data, v)
}

// OpenAI is a chat completion chunk.
type OpenAI struct {
	Choices []OpenAIChoice  `json:"choices"`
	Usage   *OpenAIUsage    `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
}

// OpenAIChoice is a chunk's choice: one, as Alicia asks for no more.
type OpenAIChoice struct {
	Index        int         `json:"index"`
	Delta        OpenAIDelta `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
}

// OpenAIDelta carries the reasoning as reasoning_content (SGLang,
// llama.cpp, DashScope, vLLM up to 0.11.0), as reasoning (vLLM since,
// Ollama's /v1, OpenRouter), or as both with the same text (vLLM for a
// while): llm reads reasoning_content first.
type OpenAIDelta struct {
	Content          *string               `json:"content"`
	ReasoningContent *string               `json:"reasoning_content"`
	Reasoning        *string               `json:"reasoning"`
	ToolCalls        []OpenAIToolCallDelta `json:"tool_calls"`
}

// OpenAIToolCallDelta is a piece of a tool call, which Index names
// across chunks.
type OpenAIToolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// OpenAIUsage comes on the last chunk, when asked for.
type OpenAIUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// Ollama is a line of Ollama's native /api/chat stream.
type Ollama struct {
	Message *struct {
		Content   string           `json:"content"`
		Thinking  string           `json:"thinking"`
		ToolCalls []OllamaToolCall `json:"tool_calls"`
	} `json:"message"`
	Done            bool            `json:"done"`
	DoneReason      string          `json:"done_reason"`
	PromptEvalCount int             `json:"prompt_eval_count"`
	EvalCount       int             `json:"eval_count"`
	Error           json.RawMessage `json:"error"`
}

// OllamaToolCall is a tool call as Ollama streams it whole, and as a
// request sends it back.
type OllamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// AGUIEvent is an AG-UI event, the fields of every type Alicia reads.
type AGUIEvent struct {
	Type           string          `json:"type"`
	MessageID      string          `json:"messageId"`
	Delta          *string         `json:"delta"`
	ToolCallID     string          `json:"toolCallId"`
	ToolCallName   string          `json:"toolCallName"`
	Subtype        string          `json:"subtype"`
	EntityID       string          `json:"entityId"`
	EncryptedValue string          `json:"encryptedValue"`
	Content        json.RawMessage `json:"content"`
	Message        string          `json:"message"`
	Code           string          `json:"code"`
	Usage          []struct {
		InputTokens     int `json:"inputTokens"`
		OutputTokens    int `json:"outputTokens"`
		ReasoningTokens int `json:"reasoningTokens"`
	} `json:"usage"`
}
