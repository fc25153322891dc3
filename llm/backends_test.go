package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
)

const (
	plainReasoning = "Okay, the user asks a plain question. Note that 3<4 and a <b>bold</b> claim are not tags.\n\nI will answer with the number they expect: 42."
	plainAnswer    = "The answer is 42."
)

var testScenarios = []standin.Scenario{
	{Name: "weather", Match: `(?i)weather`, Rounds: []standin.Round{
		{Reasoning: []string{"The user wants tomorrow's weather in Lyon.", "I should call the forecast tool."},
			ToolCalls: []standin.ToolCall{{Name: "get_weather", Arguments: map[string]any{"city": "Lyon", "days": 1}}}},
		{Reasoning: []string{"The tool says {{toolResult}}."}, Answer: "Tomorrow in Lyon: {{toolResult}}."},
	}},
	{Name: "preamble", Match: `^preamble`, Rounds: []standin.Round{
		{Reasoning: []string{"I need the time."}, Answer: "Let me check.",
			ToolCalls: []standin.ToolCall{{Name: "current_time", Arguments: map[string]any{}}}},
	}},
	{Name: "plain", Match: `^plain`, Rounds: []standin.Round{{Reasoning: strings.Split(plainReasoning, "\n\n"), Answer: plainAnswer}}},
	fault("fail-error", standin.Fault{Kind: "error", AfterTokens: 6, Message: "CUDA out of memory"}),
	fault("fail-cut", standin.Fault{Kind: "cut", AfterTokens: 6}),
	fault("fail-no-finish", standin.Fault{Kind: "no-finish", AfterTokens: 6}),
	fault("fail-no-done", standin.Fault{Kind: "no-done"}),
	fault("fail-http", standin.Fault{Kind: "http", Status: 503, Message: "model is loading"}),
	fault("fail-html", standin.Fault{Kind: "html"}),
	fault("fail-stall", standin.Fault{Kind: "stall", AfterTokens: 6, StallMs: 600}),
	{Name: "raw-tool", Match: `^raw-tool`, Rounds: []standin.Round{{Reasoning: []string{"Call it."},
		ToolCalls: []standin.ToolCall{{Name: "get_weather", Arguments: map[string]any{"city": "Paris"}}},
		Fault:     &standin.Fault{Kind: "raw-tool-call"}}}},
}

func fault(name string, f standin.Fault) standin.Scenario {
	return standin.Scenario{Name: name, Match: "^" + name, Rounds: []standin.Round{{
		Reasoning: strings.Split(plainReasoning, "\n\n"), Answer: plainAnswer, Fault: &f}}}
}

type profile struct {
	name   string
	config func(base string) llm.Config
	usage  bool // sends token counts
	agui   bool
}

func openAIProfile(name string, flavor llm.Flavor) profile {
	return profile{name: name, usage: true, config: func(base string) llm.Config {
		return llm.Config{Backend: "openai", URL: base + "/" + name + "/v1", Flavor: flavor}
	}}
}

var profiles = []profile{
	openAIProfile("vllm", llm.FlavorGeneric),
	openAIProfile("vllm-both", llm.FlavorGeneric),
	openAIProfile("vllm-legacy", llm.FlavorGeneric),
	openAIProfile("vllm-noparser", llm.FlavorGeneric),
	openAIProfile("vllm-mtp", llm.FlavorGeneric),
	openAIProfile("sglang", llm.FlavorGeneric),
	openAIProfile("sglang-0.4", llm.FlavorGeneric),
	openAIProfile("llamacpp", llm.FlavorGeneric),
	openAIProfile("llamacpp-legacy", llm.FlavorGeneric),
	openAIProfile("ollama", llm.FlavorOllama),
	openAIProfile("ollama-0.32.5", llm.FlavorOllama),
	openAIProfile("dashscope", llm.FlavorDashScope),
	openAIProfile("openrouter", llm.FlavorOpenRouter),
	{name: "ollama-native", usage: true, config: func(base string) llm.Config {
		return llm.Config{Backend: "ollama", URL: base}
	}},
	{name: "agui", agui: true, config: func(base string) llm.Config { return llm.Config{Backend: "agui", URL: base + "/agui"} }},
	{name: "agui-chunks", agui: true, config: func(base string) llm.Config { return llm.Config{Backend: "agui", URL: base + "/agui-chunks/agui"} }},
	{name: "agui-thinking", agui: true, config: func(base string) llm.Config { return llm.Config{Backend: "agui", URL: base + "/agui-thinking/agui"} }},
}

func startStandin(t testing.TB, pacing standin.Pacing) string {
	t.Helper()
	s, err := standin.New(testScenarios, pacing, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// summary coalesces deltas, so that one sequence describes every
// backend: reasoning and text as whole strings, tool calls with compact
// arguments, then usage and the ending. Whitespace-only reasoning (an
// empty think block) is left out; it carries no thought.
func summary(events []llm.Event) []string {
	var out []string
	var text strings.Builder
	kind := llm.EventKind(0)
	flush := func() {
		if kind == llm.EventReasoning && strings.TrimSpace(text.String()) != "" {
			out = append(out, "reasoning: "+strings.TrimSpace(text.String()))
		}
		if kind == llm.EventText {
			out = append(out, "text: "+text.String())
		}
		text.Reset()
		kind = 0
	}
	for _, ev := range events {
		if ev.Kind != kind {
			flush()
		}
		switch ev.Kind {
		case llm.EventReasoning, llm.EventText:
			kind = ev.Kind
			text.WriteString(ev.Text)
		case llm.EventToolCall:
			var args bytes.Buffer
			if json.Compact(&args, []byte(ev.ToolCall.Arguments)) != nil {
				args.WriteString(ev.ToolCall.Arguments)
			}
			out = append(out, fmt.Sprintf("tool: %s %s", ev.ToolCall.Name, args.String()))
		case llm.EventUsage:
			out = append(out, "usage")
		case llm.EventFinish:
			out = append(out, "finish: "+string(ev.Finish))
		case llm.EventError:
			e, _ := llm.AsError(ev.Err)
			s := "error: " + string(e.Kind)
			if e.Status != 0 {
				s += fmt.Sprintf(" %d", e.Status)
			}
			out = append(out, s)
		}
	}
	flush()
	return out
}

func collect(t testing.TB, c llm.Client, req *llm.Request) []llm.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var events []llm.Event
	for ev := range c.Stream(ctx, req) {
		events = append(events, ev)
	}
	return events
}

func user(s string) []llm.Message { return []llm.Message{{Role: llm.RoleUser, Content: s}} }

func TestBackends(t *testing.T) {
	base := startStandin(t, standin.Pacing{})
	weatherRound2 := []llm.Message{
		{Role: llm.RoleUser, Content: "What's the weather in Lyon tomorrow?"},
		{Role: llm.RoleAssistant, Reasoning: "I should call the forecast tool.", ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Lyon"}`}}},
		{Role: llm.RoleTool, ToolCallID: "call_1", Content: "sunny, 24 °C"},
	}
	type tc struct {
		name     string
		model    string
		req      llm.Request
		want     []string
		skipAGUI bool
		// errorText must appear in the error's message.
		errorText string
		// partial: the stream stops inside the reasoning, at a point that
		// depends on the backend's tokens; want's reasoning is a prefix.
		partial bool
		idle    time.Duration
	}
	plain := []string{"reasoning: " + plainReasoning, "text: " + plainAnswer, "usage", "finish: stop"}
	cases := []tc{
		{name: "thinking", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("plain question")}, want: plain},
		{name: "thinking off", model: "Qwen3-8B", req: llm.Request{Messages: user("plain question")},
			want: []string{"text: " + plainAnswer, "usage", "finish: stop"}},
		{name: "Thinking-2507 has no opening tag", model: "Qwen3-4B-Thinking-2507", skipAGUI: true,
			req: llm.Request{Thinking: true, Messages: user("plain question")}, want: plain},
		{name: "Instruct-2507 never thinks", model: "Qwen3-4B-Instruct-2507", skipAGUI: true,
			req: llm.Request{Thinking: true, Messages: user("plain question")}, want: []string{"text: " + plainAnswer, "usage", "finish: stop"}},
		{name: "no_think gives an empty think block", model: "Qwen3-8B",
			req: llm.Request{Thinking: true, Messages: user("plain question /no_think")}, want: []string{"text: " + plainAnswer, "usage", "finish: stop"}},
		{name: "tool call", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("What's the weather in Lyon tomorrow?")},
			want: []string{"reasoning: The user wants tomorrow's weather in Lyon.\n\nI should call the forecast tool.", `tool: get_weather {"city":"Lyon","days":1}`, "usage", "finish: tool_calls"}},
		{name: "tool result answered", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: weatherRound2},
			want: []string{"reasoning: The tool says sunny, 24 °C.", "text: Tomorrow in Lyon: sunny, 24 °C.", "usage", "finish: stop"}},
		{name: "text before a tool call", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("preamble")},
			want: []string{"reasoning: I need the time.", "text: Let me check.", "tool: current_time {}", "usage", "finish: tool_calls"}},
		{partial: true, name: "max tokens inside reasoning", model: "Qwen3-8B", skipAGUI: true,
			req: llm.Request{Thinking: true, MaxTokens: 6, Messages: user("plain question")}, want: []string{"reasoning: Okay, the user asks", "usage", "finish: length"}},
		{partial: true, name: "error mid-stream", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("fail-error")},
			want: []string{"reasoning: Okay, the user", "error: mid-stream"}, errorText: "CUDA out of memory"},
		{partial: true, name: "connection cut", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("fail-cut")},
			want: []string{"reasoning: Okay, the user", "error: truncated"}},
		{partial: true, name: "no finish reason", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("fail-no-finish")},
			want: []string{"reasoning: Okay, the user", "error: truncated"}},
		{name: "no [DONE]", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("fail-no-done")}, want: plain},
		{name: "HTTP 503", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("fail-http")},
			want: []string{"error: http 503"}, errorText: "model is loading"},
		{name: "HTML 502 from a proxy", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("fail-html")},
			want: []string{"error: http 502"}, errorText: "502 Bad Gateway"},
		{partial: true, name: "silent backend", model: "Qwen3-8B", req: llm.Request{Thinking: true, Messages: user("fail-stall")},
			want: []string{"reasoning: Okay, the user", "error: idle"}, idle: 250 * time.Millisecond},
	}
	for _, p := range profiles {
		for _, c := range cases {
			if p.agui && c.skipAGUI {
				continue
			}
			t.Run(p.name+"/"+c.name, func(t *testing.T) {
				cfg := p.config(base)
				cfg.Model, cfg.IdleTimeout = c.model, c.idle
				client, err := llm.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				req := c.req
				req.ConversationID = "conv_test"
				events := collect(t, client, &req)
				want := slices.Clone(c.want)
				if !p.usage {
					want = slices.DeleteFunc(want, func(s string) bool { return s == "usage" })
				}
				if p.name == "dashscope" && c.name == "Thinking-2507 has no opening tag" {
					want = plain
				}
				got := summary(events)
				if c.partial && len(got) > 0 {
					r, ok := strings.CutPrefix(got[0], "reasoning: ")
					if !ok || !strings.HasPrefix(plainReasoning, r) {
						t.Fatalf("the stream should stop inside the reasoning: %q", got)
					}
					got[0] = want[0]
				}
				if !slices.Equal(got, want) {
					t.Fatalf("events:\n got %q\nwant %q", got, want)
				}
				last := events[len(events)-1]
				if c.errorText != "" && !strings.Contains(last.Err.Error(), c.errorText) {
					t.Errorf("error %q does not say %q", last.Err, c.errorText)
				}
				assertOneTerminal(t, events)
			})
		}
	}
}

// assertOneTerminal checks the contract every stream keeps: exactly one
// finish or error, and it is last.
func assertOneTerminal(t *testing.T, events []llm.Event) {
	t.Helper()
	for i, ev := range events {
		terminal := ev.Kind == llm.EventFinish || ev.Kind == llm.EventError
		if terminal != (i == len(events)-1) {
			t.Fatalf("event %d of %d is %s", i+1, len(events), ev)
		}
	}
}

func TestRawToolCallMarkupNeverBecomesText(t *testing.T) {
	base := startStandin(t, standin.Pacing{})
	for _, name := range []string{"vllm", "vllm-noparser", "sglang", "llamacpp", "dashscope", "openrouter"} {
		t.Run(name, func(t *testing.T) {
			client, _ := llm.New(llm.Config{Backend: "openai", URL: base + "/" + name + "/v1", Model: "Qwen3-8B", Flavor: flavorOf(name)})
			got := summary(collect(t, client, &llm.Request{Thinking: true, Messages: user("raw-tool")}))
			want := []string{"reasoning: Call it.", `tool: get_weather {"city":"Paris"}`, "usage", "finish: tool_calls"}
			if !slices.Equal(got, want) {
				t.Fatalf("got %q\nwant %q", got, want)
			}
		})
	}
}

func flavorOf(profile string) llm.Flavor {
	switch {
	case strings.HasPrefix(profile, "dashscope"):
		return llm.FlavorDashScope
	case strings.HasPrefix(profile, "openrouter"):
		return llm.FlavorOpenRouter
	case strings.HasPrefix(profile, "ollama"):
		return llm.FlavorOllama
	}
	return llm.FlavorGeneric
}

// llama.cpp sends ":" keep-alive comments during a long prefill; they
// must neither break the stream nor count as data. The prefill outlasts
// the idle timeout, which only the pings (every second) keep from
// firing; 500 ms of slack between a ping and the timeout, because 100 ms
// was less than a loaded CI machine's delay once.
func TestKeepAliveDuringLongPrefill(t *testing.T) {
	s, _ := standin.New([]standin.Scenario{{Name: "slow", Rounds: []standin.Round{{Reasoning: []string{"Hm."}, Answer: "Done."}},
		Pacing: &standin.Pacing{TTFTMs: 2500}}}, standin.Pacing{}, nil)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	client, _ := llm.New(llm.Config{Backend: "openai", URL: ts.URL + "/llamacpp/v1", Model: "Qwen3-8B", IdleTimeout: 1500 * time.Millisecond})
	got := summary(collect(t, client, &llm.Request{Thinking: true, Messages: user("anything")}))
	want := []string{"reasoning: Hm.", "text: Done.", "usage", "finish: stop"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// DashScope refuses thinking off for a Thinking-2507 model, in its own
// SSE-framed 400.
func TestDashScopeRefusal(t *testing.T) {
	base := startStandin(t, standin.Pacing{})
	client, _ := llm.New(llm.Config{Backend: "openai", URL: base + "/dashscope/v1", Model: "qwen3-30b-a3b-thinking-2507"})
	events := collect(t, client, &llm.Request{Messages: user("plain")})
	e, ok := llm.AsError(events[len(events)-1].Err)
	if !ok || e.Status != 400 || !strings.Contains(e.Message, "restricted to True") || e.Code != "invalid_parameter_error invalid_request_error" {
		t.Fatalf("got %v", events)
	}
}

func TestCancellationStopsTheStream(t *testing.T) {
	base := startStandin(t, standin.Pacing{TTFTMs: 5, TokenMs: 20})
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			cfg := p.config(base)
			cfg.Model = "Qwen3-8B"
			client, _ := llm.New(cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var last llm.Event
			n := 0
			start := time.Now()
			for ev := range client.Stream(ctx, &llm.Request{ConversationID: "c", Thinking: true, Messages: user("plain")}) {
				n++
				last = ev
				if n == 3 {
					cancel()
				}
			}
			if e, ok := llm.AsError(last.Err); !ok || e.Kind != llm.ErrCancelled {
				t.Fatalf("last event after cancel: %v", last)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("the stream took %v to stop", d)
			}
		})
	}
}

// Breaking out of the loop must release the connection at once.
func TestBreakingOutClosesTheResponse(t *testing.T) {
	closed := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x%d \"}}]}\n\n", i); err != nil {
				close(closed)
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(closed)
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}))
	defer ts.Close()
	// A model named as its weights: an unknown one would hold its answer
	// until it shows whether the template opened the thinking.
	client, _ := llm.New(llm.Config{Backend: "openai", URL: ts.URL + "/v1", Model: "Qwen/Qwen3-8B"})
	for ev := range client.Stream(context.Background(), &llm.Request{Messages: user("hi")}) {
		if ev.Kind == llm.EventText {
			break
		}
	}
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the server kept streaming after the consumer stopped")
	}
}

func newHTTPServer(s *standin.Server) *httptest.Server { return httptest.NewServer(s.Handler()) }
