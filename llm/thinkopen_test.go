package llm_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
)

const thinkingWeights = "Qwen/Qwen3-4B-Thinking-2507"

// aliasStandin serves a Thinking-2507 model under the alias "assistant",
// behind handler (which may hide the model-information endpoints).
func aliasStandin(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	s, err := standin.New(testScenarios, standin.Pacing{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Serve("assistant", thinkingWeights)
	h := s.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// turnParts coalesces one turn: its reasoning, its answer text, and how
// many reasoning events carried it.
func turnParts(events []llm.Event) (reasoning, answer string, reasoningEvents int) {
	var r, a strings.Builder
	for _, ev := range events {
		switch ev.Kind {
		case llm.EventReasoning:
			r.WriteString(ev.Text)
			reasoningEvents++
		case llm.EventText:
			a.WriteString(ev.Text)
		case llm.EventError:
			return r.String(), a.String() + " ERROR " + ev.Err.Error(), reasoningEvents
		}
	}
	return r.String(), a.String(), reasoningEvents
}

// checkAnswer fails when any reasoning reached the answer.
func checkAnswer(t *testing.T, reasoning, answer string) {
	t.Helper()
	if answer != plainAnswer {
		t.Fatalf("answer %q, want %q (reasoning %q)", answer, plainAnswer, reasoning)
	}
	if !strings.Contains(reasoning, "plain question") || strings.Contains(reasoning, "</think>") {
		t.Fatalf("reasoning %q", reasoning)
	}
}

// A Thinking-2507 model served under an alias by a server without a
// reasoning parser: the client asks the server what it serves (vLLM's
// /v1/models root, llama.cpp's /props chat template) and reads the
// reasoning as reasoning from the first token on.
func TestThinkOpenModelUnderAnAliasIsFoundByAsking(t *testing.T) {
	base := aliasStandin(t, nil)
	for _, p := range []string{"vllm-noparser", "vllm-mtp", "llamacpp-none"} {
		t.Run(p, func(t *testing.T) {
			c, err := llm.New(llm.Config{Backend: "openai", URL: base + "/" + p + "/v1", Model: "assistant"})
			if err != nil {
				t.Fatal(err)
			}
			reasoning, answer, n := turnParts(collect(t, c, &llm.Request{Messages: user("plain question"), Thinking: true}))
			checkAnswer(t, reasoning, answer)
			// Streamed as it came, not held back to the </think>.
			if n < 5 {
				t.Fatalf("the reasoning came in %d events: the client did not know before the </think>", n)
			}
		})
	}
}

// Behind a gateway that forwards only chat completions nothing can be
// asked: the first bare </think> shows that what came before was
// reasoning, and the client remembers it for its model.
func TestBareThinkEndIsNeverAnAnswerAndIsRemembered(t *testing.T) {
	base := aliasStandin(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
				http.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	c, err := llm.New(llm.Config{Backend: "openai", URL: base + "/vllm-noparser/v1", Model: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Messages: user("plain question"), Thinking: true}
	reasoning, answer, _ := turnParts(collect(t, c, req))
	checkAnswer(t, reasoning, answer)
	// The second turn sends the first answer back as history: the answer
	// only, and this time the reasoning streams from its first token.
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: answer}, llm.Message{Role: llm.RoleUser, Content: "plain question again"})
	reasoning, answer, n := turnParts(collect(t, c, req))
	checkAnswer(t, reasoning, answer)
	if n < 5 {
		t.Fatalf("second turn: the reasoning came in %d events; the client forgot what it learned", n)
	}
}

// A model the server names as an ordinary hybrid or instruct model keeps
// streaming its answer as it comes.
func TestAskedPlainModelStreamsItsAnswer(t *testing.T) {
	s, err := standin.New(testScenarios, standin.Pacing{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Serve("assistant", "Qwen/Qwen3-4B-Instruct-2507")
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for _, cfg := range []llm.Config{
		{Backend: "openai", URL: ts.URL + "/vllm-noparser/v1", Model: "assistant"},
		{Backend: "openai", URL: ts.URL + "/llamacpp-none/v1", Model: "assistant"},
		{Backend: "ollama", URL: ts.URL, Model: "assistant"},
	} {
		c, err := llm.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		texts := 0
		var answer strings.Builder
		for _, ev := range collect(t, c, &llm.Request{Messages: user("plain question")}) {
			if ev.Kind == llm.EventText {
				texts++
				answer.WriteString(ev.Text)
			}
		}
		if answer.String() != plainAnswer || texts < 3 {
			t.Fatalf("%s: answer %q in %d events; want it streamed", cfg.URL, answer.String(), texts)
		}
	}
}
