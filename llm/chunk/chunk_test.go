package chunk

import (
	"encoding/json"
	"reflect"
	"testing"
)

// chunkSeeds are the shapes the three streaming dialects send, and the
// malformed and unusual inputs a decoder is likeliest to disagree on.
var chunkSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning_content":" forecast"},"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a\u00e9\ud83d\ude00 \"q\" \\ \u0000 \ud800"}}]}`,
	"{\"choices\":[{\"delta\":{\"content\":\"bad \xff\xfe utf8 \xe2\x82\"}}]}",
	`{"Choices":[{"Index":0,"DELTA":{"Content":"keys match case-insensitively"}}]}`,
	`{"choices":[{"delta":{"content":null,"reasoning":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":4}}}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"a":[1,2,{"b":null}]}}}]}}]}`,
	`{"error":{"message":"boom","code":500}}`,
	`{"error":null,"choices":[]}`,
	`{"choices":[{"delta":{"content":"dup"},"delta":{"reasoning_content":"second"}}]}`,
	`{"choices":[{"index":1.5}]}`,
	`{"choices":[{"index":1e2}]}`,
	`{"choices":"nope"}`,
	`{"choices":[{"delta":{"content":"x"}}]} trailing`,
	`{"choices":[{"delta":{"content":"x"}}]`,
	`{"choices":[{"delta":{"content":12}}]}`,
	`{"message":{"role":"assistant","content":"","thinking":"hm"},"done":false}`,
	`{"message":{"content":"","tool_calls":[{"function":{"name":"w","arguments":{"city":"Lyon"}}}]},"done":true,"done_reason":"stop","prompt_eval_count":5,"eval_count":7}`,
	`{"error":"model not found"}`,
	`{"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"step"}`,
	`{"type":"RUN_ERROR","message":"x","code":"E"}`,
	`{"type":"RUN_FINISHED","usage":[{"inputTokens":1,"outputTokens":2,"reasoningTokens":3}]}`,
	`{"type":"TOOL_CALL_RESULT","content":{"ok":true}}`,
	`[]`, `null`, ``, ` `, `{`, `"s"`,
}

// TestDecodeMatchesEncodingJSON keeps the fast decoder honest: for
// every chunk type, it must accept and refuse what encoding/json does and
// decode the same values.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, in := range chunkSeeds {
		checkChunkDecode(t, []byte(in))
	}
}

func FuzzDecode(f *testing.F) {
	for _, in := range chunkSeeds {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkChunkDecode(t, in) })
}

func checkChunkDecode(t *testing.T, in []byte) {
	t.Helper()
	same(t, in, func() any { return new(OpenAI) })
	same(t, in, func() any { return new(Ollama) })
	same(t, in, func() any { return new(AGUIEvent) })
}

func same(t *testing.T, in []byte, fresh func() any) {
	t.Helper()
	want, got := fresh(), fresh()
	werr := json.Unmarshal(in, want)
	gerr := Decode(in, got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%T from %q: encoding/json says %v, Decode says %v", want, in, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%T from %q:\nencoding/json %+v\nDecode        %+v", want, in, want, got)
	}
}
