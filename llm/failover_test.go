package llm_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/failover"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
)

// faultyStandin is a stand-in whose every turn fails with f, in the wire
// format of the real servers.
func faultyStandin(t *testing.T, f standin.Fault) *httptest.Server {
	t.Helper()
	s, err := standin.New([]standin.Scenario{{Name: "always", Rounds: []standin.Round{{
		Reasoning: strings.Split(plainReasoning, "\n\n"), Answer: plainAnswer, Fault: &f}}}}, standin.Pacing{TTFTMs: 1, TokenMs: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// servers is the pool of a client New returned.
func servers(c llm.Client) *failover.Pool { return c.(failover.Served).Servers() }

func plainTurn(t *testing.T, c llm.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events []llm.Event
	for ev := range c.Stream(ctx, &llm.Request{Thinking: true, Messages: []llm.Message{{Role: llm.RoleUser, Content: "plain question"}}}) {
		events = append(events, ev)
	}
	return summary(events)
}

// A model server that refuses, answers an error status or is silent past
// the first-byte timeout is left for the next one within the same turn,
// which answers it whole; the pool then says the second serves.
func TestModelFailover(t *testing.T) {
	good, _ := standin.New(testScenarios, standin.Pacing{TTFTMs: 1, TokenMs: 1}, nil)
	for _, tc := range []struct {
		name  string
		first func(t *testing.T) string
	}{
		{"down", func(t *testing.T) string { return testenv.ClosedURL(t) }},
		{"erroring", func(t *testing.T) string {
			return faultyStandin(t, standin.Fault{Kind: "http", Status: 500, Message: "engine died"}).URL
		}},
		{"slow", func(t *testing.T) string { return testenv.SlowServer(t, good.Handler()).URL }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			second, posts := testenv.CountingServer(t, good.Handler(), isPost)
			first := tc.first(t) + "/vllm/v1"
			c, err := llm.New(llm.Config{Backend: "openai", URL: first + ", " + second.URL + "/vllm/v1", Model: "Qwen3-8B",
				FirstByteTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(plainTurn(t, c), " | ")
			if !strings.Contains(got, "text: "+plainAnswer) || !strings.HasSuffix(got, "finish: stop") || posts.Load() != 1 {
				t.Fatalf("turn %q, %d requests to the second server", got, posts.Load())
			}
			st := servers(c).Status()
			if st.Serving != second.URL+"/vllm/v1" || st.Servers[0].State != "down" {
				t.Fatalf("status %+v", st)
			}
			// The next turn goes straight to the second server.
			if got := strings.Join(plainTurn(t, c), " | "); !strings.Contains(got, plainAnswer) || posts.Load() != 2 {
				t.Fatalf("second turn %q, %d requests", got, posts.Load())
			}
		})
	}
}

// An answer that breaks off after its first bytes is not asked of another
// server, which would repeat them: the turn fails as it did with one.
func TestModelMidStreamErrorNotRetried(t *testing.T) {
	broken := faultyStandin(t, standin.Fault{Kind: "error", AfterTokens: 6, Message: "CUDA out of memory"})
	good, _ := standin.New(testScenarios, standin.Pacing{TTFTMs: 1, TokenMs: 1}, nil)
	second, posts := testenv.CountingServer(t, good.Handler(), isPost)
	c, err := llm.New(llm.Config{Backend: "openai", URL: broken.URL + "/vllm/v1," + second.URL + "/vllm/v1", Model: "Qwen3-8B"})
	if err != nil {
		t.Fatal(err)
	}
	got := plainTurn(t, c)
	if len(got) == 0 || got[len(got)-1] != "error: mid-stream" || posts.Load() != 0 {
		t.Fatalf("turn %q, %d requests to the second server", got, posts.Load())
	}
	if st := servers(c).Status(); st.Servers[0].State != "serving" {
		t.Fatalf("status %+v", st)
	}
}

// A request the server rejects as malformed (400) would fail everywhere:
// it is not asked again of the next, and the server is not set aside.
func TestModelBadRequestNotFailedOver(t *testing.T) {
	bad := faultyStandin(t, standin.Fault{Kind: "http", Status: 400, Message: "prompt too long"})
	good, _ := standin.New(testScenarios, standin.Pacing{TTFTMs: 1, TokenMs: 1}, nil)
	second, posts := testenv.CountingServer(t, good.Handler(), isPost)
	c, _ := llm.New(llm.Config{Backend: "openai", URL: bad.URL + "/vllm/v1," + second.URL + "/vllm/v1", Model: "Qwen3-8B"})
	got := plainTurn(t, c)
	if len(got) == 0 || got[len(got)-1] != "error: http 400" || posts.Load() != 0 {
		t.Fatalf("turn %q, %d requests to the second server", got, posts.Load())
	}
}

// With the first server down, the model probes ask the next one: a
// Thinking-2507 model served under an alias is known before the first
// token, and its reasoning streams as reasoning from the start.
func TestModelProbesFailOver(t *testing.T) {
	base := aliasStandin(t, nil)
	c, err := llm.New(llm.Config{Backend: "openai", URL: testenv.ClosedURL(t) + "/vllm-noparser/v1," + base + "/vllm-noparser/v1", Model: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	reasoning, answer, n := turnParts(collect(t, c, &llm.Request{Messages: user("plain question"), Thinking: true}))
	checkAnswer(t, reasoning, answer)
	// Streamed as it came, not held back to the </think>.
	if n < 5 {
		t.Fatalf("the reasoning came in %d events: the probe did not reach the second server", n)
	}
}

func isPost(r *http.Request) bool { return r.Method == http.MethodPost }
