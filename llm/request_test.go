package llm_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/llm"
)

// captureRequest returns the JSON body the client sends for req.
func captureRequest(t *testing.T, cfg llm.Config, req *llm.Request) map[string]any {
	t.Helper()
	var body map[string]any
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || strings.HasSuffix(r.URL.Path, "/api/show") {
			// The client asking what model is served: this server cannot say.
			http.NotFound(w, r)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request is not JSON: %s", raw)
		}
		if got := r.Header.Get("Authorization"); cfg.APIKey != "" && got != "Bearer "+cfg.APIKey {
			t.Errorf("Authorization = %q", got)
		}
		http.Error(w, `{"error":"captured"}`, http.StatusTeapot)
	}))
	defer ts.Close()
	switch cfg.Backend {
	case "openai":
		cfg.URL = ts.URL + "/v1"
	case "agui":
		cfg.URL = ts.URL + "/agui"
	default:
		cfg.URL = ts.URL
	}
	client, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	collect(t, client, req)
	return body
}

// history of two turns: the first answered with reasoning, the second in
// a tool loop.
func twoTurns() []llm.Message {
	return []llm.Message{
		{ID: "u1", Role: llm.RoleUser, Content: "Hi"},
		{ID: "r1", Role: llm.RoleReasoning, Content: "old thoughts", EncryptedValue: "enc-1"},
		{ID: "r0", Role: llm.RoleReasoning, Content: "older thoughts"},
		{ID: "a1", Role: llm.RoleAssistant, Content: "<think>\nold thoughts\n</think>\n\nHello!", Reasoning: "old thoughts"},
		{ID: "u2", Role: llm.RoleUser, Content: "Weather in Lyon?"},
		{ID: "a2", Role: llm.RoleAssistant, Reasoning: "I need the forecast.", ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Lyon"}`}}},
		{ID: "t1", Role: llm.RoleTool, ToolCallID: "call_1", Content: "sunny"},
	}
}

func messages(body map[string]any) []map[string]any {
	var out []map[string]any
	for _, m := range body["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

func TestOpenAIRequestPerFlavor(t *testing.T) {
	for _, c := range []struct {
		flavor   llm.Flavor
		thinking bool
		// check inspects the thinking switch and sampling extras.
		check func(t *testing.T, b map[string]any)
	}{
		{llm.FlavorGeneric, true, func(t *testing.T, b map[string]any) {
			kw := b["chat_template_kwargs"].(map[string]any)
			if kw["enable_thinking"] != true || b["top_k"] != 20.0 || b["min_p"] != 0.0 || b["temperature"] != 0.6 || b["top_p"] != 0.95 {
				t.Errorf("thinking request %v", b)
			}
		}},
		{llm.FlavorGeneric, false, func(t *testing.T, b map[string]any) {
			kw := b["chat_template_kwargs"].(map[string]any)
			if kw["enable_thinking"] != false || b["temperature"] != 0.7 || b["top_p"] != 0.8 {
				t.Errorf("non-thinking request %v", b)
			}
		}},
		{llm.FlavorDashScope, false, func(t *testing.T, b map[string]any) {
			if b["enable_thinking"] != false || b["chat_template_kwargs"] != nil || b["top_k"] != 20.0 || b["min_p"] != nil {
				t.Errorf("dashscope request %v", b)
			}
		}},
		{llm.FlavorOllama, false, func(t *testing.T, b map[string]any) {
			if b["reasoning_effort"] != "none" || b["top_k"] != nil || b["chat_template_kwargs"] != nil {
				t.Errorf("ollama request %v", b)
			}
		}},
		{llm.FlavorOllama, true, func(t *testing.T, b map[string]any) {
			if _, ok := b["reasoning_effort"]; ok {
				t.Errorf("ollama thinking request %v", b)
			}
		}},
		{llm.FlavorOpenRouter, false, func(t *testing.T, b map[string]any) {
			if r := b["reasoning"].(map[string]any); r["enabled"] != false {
				t.Errorf("openrouter request %v", b)
			}
		}},
	} {
		t.Run(string(c.flavor), func(t *testing.T) {
			b := captureRequest(t, llm.Config{Backend: "openai", Flavor: c.flavor, Model: "qwen3", APIKey: "sk-test"},
				&llm.Request{System: "Be brief.", Thinking: c.thinking, Messages: twoTurns(),
					Tools: []llm.Tool{{Name: "get_weather", Description: "forecast", Parameters: []byte(`{"type":"object"}`)}}})
			c.check(t, b)
			if b["stream"] != true || b["stream_options"].(map[string]any)["include_usage"] != true {
				t.Errorf("not a streaming request with usage: %v", b)
			}
			msgs := messages(b)
			roles := []string{}
			for _, m := range msgs {
				roles = append(roles, m["role"].(string))
				for _, k := range []string{"reasoning", "reasoning_content", "thinking"} {
					if _, ok := m[k]; ok {
						t.Errorf("message carries %q: %v", k, m)
					}
				}
			}
			if strings.Join(roles, ",") != "system,user,assistant,user,assistant,tool" {
				t.Fatalf("roles %v", roles)
			}
			// The earlier answer goes back without its reasoning.
			if msgs[2]["content"] != "Hello!" {
				t.Errorf("earlier answer sent as %q", msgs[2]["content"])
			}
			// Inside the tool loop, servers that render Qwen3's template
			// get the reasoning inline; the others get none.
			loop := msgs[4]["content"].(string)
			if wantInline := c.flavor == llm.FlavorGeneric; strings.Contains(loop, "I need the forecast.") != wantInline {
				t.Errorf("tool-loop reasoning inline = %v for %s: %q", !wantInline, c.flavor, loop)
			}
			call := msgs[4]["tool_calls"].([]any)[0].(map[string]any)
			if call["id"] != "call_1" || call["function"].(map[string]any)["arguments"] != `{"city":"Lyon"}` {
				t.Errorf("tool call sent as %v", call)
			}
			if msgs[5]["tool_call_id"] != "call_1" {
				t.Errorf("tool result sent as %v", msgs[5])
			}
			tool := b["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)
			if tool["name"] != "get_weather" || tool["parameters"].(map[string]any)["type"] != "object" {
				t.Errorf("tools sent as %v", b["tools"])
			}
		})
	}
}

func TestOllamaNativeRequest(t *testing.T) {
	b := captureRequest(t, llm.Config{Backend: "ollama", Model: "qwen3:8b"},
		&llm.Request{Thinking: false, MaxTokens: 100, Messages: twoTurns()})
	if b["think"] != false || b["stream"] != true {
		t.Errorf("request %v", b)
	}
	opts := b["options"].(map[string]any)
	if opts["temperature"] != 0.7 || opts["top_k"] != 20.0 || opts["num_predict"] != 100.0 {
		t.Errorf("options %v", opts)
	}
	msgs := messages(b)
	call := msgs[3]["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if call["arguments"].(map[string]any)["city"] != "Lyon" {
		t.Errorf("arguments are not an object: %v", call)
	}
	if msgs[4]["tool_name"] != "get_weather" {
		t.Errorf("tool result without its tool's name: %v", msgs[4])
	}
	for _, m := range msgs {
		if strings.Contains(m["content"].(string), "thoughts") || strings.Contains(m["content"].(string), "forecast.") {
			t.Errorf("reasoning sent to Ollama: %v", m)
		}
	}
}

func TestAGUIRequest(t *testing.T) {
	b := captureRequest(t, llm.Config{Backend: "agui"}, &llm.Request{ConversationID: "conv_1", Thinking: true, Messages: twoTurns(),
		Tools: []llm.Tool{{Name: "get_weather", Description: "forecast"}}})
	if b["threadId"] != "conv_1" || b["runId"] == "" || b["protocolVersion"] != "1.0" {
		t.Errorf("input %v", b)
	}
	if b["forwardedProps"].(map[string]any)["thinking"] != true {
		t.Errorf("forwardedProps %v", b["forwardedProps"])
	}
	var ids []string
	for _, m := range messages(b) {
		ids = append(ids, m["id"].(string))
		if m["id"] == "r1" && (m["content"] != "" || m["encryptedValue"] != "enc-1") {
			t.Errorf("earlier reasoning goes back as its encrypted value only: %v", m)
		}
	}
	// r0 had no encrypted value: nothing of it goes back.
	if strings.Join(ids, ",") != "u1,r1,a1,u2,a2,t1" {
		t.Errorf("messages %v", ids)
	}
}

func TestGuessFlavor(t *testing.T) {
	for url, want := range map[string]llm.Flavor{
		"https://dashscope-intl.aliyuncs.com/compatible-mode/v1": llm.FlavorDashScope,
		"https://openrouter.ai/api/v1":                           llm.FlavorOpenRouter,
		"http://gpu-box:11434/v1":                                llm.FlavorOllama,
		"https://proxy.example/ollama/v1":                        llm.FlavorOllama,
		"http://vllm:8000/v1":                                    llm.FlavorGeneric,
	} {
		c, err := llm.New(llm.Config{Backend: "openai", URL: url})
		if err != nil {
			t.Fatal(err)
		}
		if got := llm.FlavorOf(c); got != want {
			t.Errorf("%s: flavor %s, want %s", url, got, want)
		}
	}
}
