package llm_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
)

// recordingStandin serves the test scenarios and keeps the body of every
// chat request, in order.
type recordingStandin struct {
	URL    string
	mu     sync.Mutex
	bodies []map[string]any
}

func startRecordingStandin(t testing.TB, scenarios []standin.Scenario, pacing standin.Pacing) *recordingStandin {
	t.Helper()
	s, err := standin.New(scenarios, pacing, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Serve("Qwen3-8B", "Qwen/Qwen3-8B")
	s.Serve("qwen-thinking", "Qwen/Qwen3-4B-Thinking-2507")
	rs := &recordingStandin{}
	s.Recorded = func(r *http.Request, body []byte) {
		if strings.HasSuffix(r.URL.Path, "/api/show") {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Errorf("request to %s is not JSON: %s", r.URL.Path, body)
			return
		}
		rs.mu.Lock()
		rs.bodies = append(rs.bodies, v)
		rs.mu.Unlock()
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	rs.URL = ts.URL
	return rs
}

func (rs *recordingStandin) last(t testing.TB) map[string]any {
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.bodies) == 0 {
		t.Fatal("no request recorded")
	}
	return rs.bodies[len(rs.bodies)-1]
}

// The reasoning so far as a server streamed it: vLLM keeps the newline
// after <think>, and the cut fell mid-sentence.
const cutReasoning = "\nOkay, the user asks a plain question.\n\nI will answer with the number they"

// backendShapes are the backends of the issue, each with the shape its
// follow-up request must have after reasoning cut short, and its
// thinking switch turned off.
var backendShapes = []struct {
	name     string
	config   func(base string) llm.Config
	followUp llm.FollowUp
	// continued checks a continuation's extra fields; reAsked a re-ask's.
	continued func(t *testing.T, b map[string]any)
	// off checks the thinking switch is off.
	off func(t *testing.T, b map[string]any)
}{
	{name: "vllm", config: oaConfig("vllm", llm.FlavorGeneric), followUp: llm.FollowUpContinue,
		continued: genericContinuation, off: templateKwargsOff},
	{name: "sglang", config: oaConfig("sglang", llm.FlavorGeneric), followUp: llm.FollowUpContinue,
		continued: genericContinuation, off: templateKwargsOff},
	{name: "llamacpp", config: oaConfig("llamacpp", llm.FlavorGeneric), followUp: llm.FollowUpContinue,
		continued: genericContinuation, off: templateKwargsOff},
	{name: "ollama /v1", config: oaConfig("ollama", llm.FlavorOllama), followUp: llm.FollowUpContinue,
		continued: func(t *testing.T, b map[string]any) {
			if _, ok := b["continue_final_message"]; ok {
				t.Errorf("continue_final_message sent to Ollama: %v", b)
			}
		},
		off: func(t *testing.T, b map[string]any) {
			if b["reasoning_effort"] != "none" {
				t.Errorf("reasoning_effort %v", b["reasoning_effort"])
			}
		}},
	{name: "ollama native", config: func(base string) llm.Config { return llm.Config{Backend: "ollama", URL: base, Model: "Qwen3-8B"} },
		followUp:  llm.FollowUpContinue,
		continued: func(t *testing.T, b map[string]any) {},
		off: func(t *testing.T, b map[string]any) {
			if b["think"] != false {
				t.Errorf("think %v", b["think"])
			}
		}},
	{name: "dashscope", config: oaConfig("dashscope", llm.FlavorDashScope), followUp: llm.FollowUpReAsk,
		off: func(t *testing.T, b map[string]any) {
			if b["enable_thinking"] != false {
				t.Errorf("enable_thinking %v", b["enable_thinking"])
			}
		}},
	{name: "openrouter", config: oaConfig("openrouter", llm.FlavorOpenRouter), followUp: llm.FollowUpReAsk,
		off: func(t *testing.T, b map[string]any) {
			if r, _ := b["reasoning"].(map[string]any); r["enabled"] != false {
				t.Errorf("reasoning %v", b["reasoning"])
			}
		}},
	{name: "agui", config: func(base string) llm.Config { return llm.Config{Backend: "agui", URL: base + "/agui"} },
		followUp: llm.FollowUpReAsk,
		off: func(t *testing.T, b map[string]any) {
			if b["forwardedProps"].(map[string]any)["thinking"] != false {
				t.Errorf("forwardedProps %v", b["forwardedProps"])
			}
			// Qwen3's soft switch, the only one every agent passes on.
			if sys := messages(b)[0]; sys["role"] != "system" || !strings.HasSuffix(sys["content"].(string), "/no_think") {
				t.Errorf("no /no_think in the system message: %v", sys)
			}
		}},
}

func oaConfig(profile string, flavor llm.Flavor) func(string) llm.Config {
	return func(base string) llm.Config {
		return llm.Config{Backend: "openai", URL: base + "/" + profile + "/v1", Flavor: flavor, Model: "Qwen3-8B"}
	}
}

func templateKwargsOff(t *testing.T, b map[string]any) {
	t.Helper()
	if kw, _ := b["chat_template_kwargs"].(map[string]any); kw["enable_thinking"] != false {
		t.Errorf("chat_template_kwargs %v", b["chat_template_kwargs"])
	}
}

// genericContinuation: vLLM needs continue_final_message with
// add_generation_prompt false, SGLang continue_final_message, llama.cpp
// thinking off; one request suits the three.
func genericContinuation(t *testing.T, b map[string]any) {
	t.Helper()
	if b["continue_final_message"] != true || b["add_generation_prompt"] != false {
		t.Errorf("continue_final_message %v, add_generation_prompt %v", b["continue_final_message"], b["add_generation_prompt"])
	}
	templateKwargsOff(t, b)
}

func TestAnswerNowPerBackend(t *testing.T) {
	rs := startRecordingStandin(t, testScenarios, standin.Pacing{})
	for _, bk := range backendShapes {
		t.Run(bk.name, func(t *testing.T) {
			c, err := llm.New(bk.config(rs.URL))
			if err != nil {
				t.Fatal(err)
			}
			if got := llm.FollowUpOf(c); got != bk.followUp {
				t.Fatalf("follow-up %s, want %s", got, bk.followUp)
			}
			req := &llm.Request{ConversationID: "conv_1", System: "Be brief.", Thinking: true, Messages: user("plain question")}
			events := collect(t, c, llm.AnswerNow(req, cutReasoning))
			// The answer only: no reasoning again, nothing of it spoken.
			want := []string{"text: " + plainAnswer, "usage", "finish: stop"}
			if strings.HasPrefix(bk.name, "agui") {
				want = []string{"text: " + plainAnswer, "finish: stop"}
			}
			if got := summary(events); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("events %q, want %q", got, want)
			}
			b := rs.last(t)
			msgs := messages(b)
			last := msgs[len(msgs)-1]
			bk.off(t, b)
			switch bk.followUp {
			case llm.FollowUpContinue:
				// The reasoning so far, verbatim but for the newlines the
				// template trims, closed: the model goes on with its answer.
				wantContent := "<think>\nOkay, the user asks a plain question.\n\nI will answer with the number they\n</think>\n\n"
				if last["role"] != "assistant" || last["content"] != wantContent {
					t.Errorf("last message %q, want the assistant's %q", last, wantContent)
				}
				bk.continued(t, b)
			case llm.FollowUpReAsk:
				if last["role"] != "user" || last["content"] != "plain question" {
					t.Errorf("last message %v, want the question again", last)
				}
				sys := msgs[0]
				content, _ := sys["content"].(string)
				if sys["role"] != "system" || !strings.HasPrefix(content, "Be brief.") ||
					!strings.Contains(content, "Okay, the user asks a plain question.\n\nI will answer with the number they") {
					t.Errorf("system message %q does not give the reasoning so far", content)
				}
			}
		})
	}
}

func TestThinkingOffPerBackend(t *testing.T) {
	rs := startRecordingStandin(t, testScenarios, standin.Pacing{})
	for _, bk := range backendShapes {
		t.Run(bk.name, func(t *testing.T) {
			c, err := llm.New(bk.config(rs.URL))
			if err != nil {
				t.Fatal(err)
			}
			events := collect(t, c, &llm.Request{ConversationID: "conv_1", Messages: user("plain question")})
			for _, s := range summary(events) {
				if strings.HasPrefix(s, "reasoning") {
					t.Fatalf("reasoning with thinking off: %q", summary(events))
				}
			}
			bk.off(t, rs.last(t))
		})
	}
}

// A Thinking-2507 template opens <think> in the generation prompt, to
// which SGLang and llama.cpp append the prefill: the prefill must not open
// it again.
func TestContinuationUnderATemplateThatOpensThink(t *testing.T) {
	rs := startRecordingStandin(t, testScenarios, standin.Pacing{})
	c, err := llm.New(llm.Config{Backend: "openai", URL: rs.URL + "/llamacpp/v1", Model: "qwen-thinking"})
	if err != nil {
		t.Fatal(err)
	}
	// The client knows the template from the model's name.
	req := &llm.Request{Thinking: true, Messages: user("plain question")}
	events := collect(t, c, llm.AnswerNow(req, cutReasoning))
	if got := summary(events); strings.Join(got, "|") != "text: "+plainAnswer+"|usage|finish: stop" {
		t.Fatalf("events %q", got)
	}
	msgs := messages(rs.last(t))
	if got := msgs[len(msgs)-1]["content"]; got != "Okay, the user asks a plain question.\n\nI will answer with the number they\n</think>\n\n" {
		t.Errorf("prefill %q", got)
	}
}

// What the servers do with a continuation sent the wrong way: the
// stand-in refuses it or reasons again, as they do.
func TestStandinKeepsTheServersContinuationRules(t *testing.T) {
	rs := startRecordingStandin(t, testScenarios, standin.Pacing{})
	prefill := map[string]any{"role": "assistant", "content": "<think>\nI will say 42.\n</think>\n\n"}
	post := func(profile string, extra map[string]any) (int, string) {
		body := map[string]any{"model": "Qwen3-8B", "stream": true, "messages": []any{
			map[string]any{"role": "user", "content": "plain question"}, prefill}}
		for k, v := range extra {
			body[k] = v
		}
		raw, _ := json.Marshal(body)
		resp, err := http.Post(rs.URL+"/"+profile+"/v1/chat/completions", "application/json", strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, out.String()
	}
	if status, body := post("llamacpp", nil); status != http.StatusBadRequest || !strings.Contains(body, "incompatible with enable_thinking") {
		t.Errorf("llama.cpp prefill with thinking on: %d %s", status, body)
	}
	if status, _ := post("vllm", map[string]any{"continue_final_message": true}); status != http.StatusBadRequest {
		t.Errorf("vLLM continue_final_message with the default add_generation_prompt: %d", status)
	}
	// Without continue_final_message vLLM starts a new assistant turn,
	// thinking again.
	if status, body := post("vllm", nil); status != http.StatusOK || !strings.Contains(body, `"reasoning"`) {
		t.Errorf("vLLM final assistant message without continue_final_message: %d %s", status, body)
	}
	// vLLM's newest qwen3 parser files the continuation as reasoning when
	// not told thinking is off; the client reads it as the answer.
	if status, body := post("vllm", map[string]any{"continue_final_message": true, "add_generation_prompt": false}); status != http.StatusOK ||
		!strings.Contains(body, `"reasoning":"The"`) {
		t.Errorf("vLLM continuation without enable_thinking false: %d %s", status, body)
	}
}
