package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
)

type conformance struct {
	Status                     int
	ContentType                string
	CRFound                    bool
	BadFrames                  int
	Types                      []string
	SchemaFailures             []string
	VerifyError                *string
	Warnings                   []string
	RunStarted, Last           map[string]any
	AgentFailed, AgentRunError *string
	SecondRunFailed            *string
	FirstRunMessages           int
	AgentMessages              []struct {
		Role    string
		Content *string
	}
	FirstFrame string
	ModelSpoke bool
}

// The AG-UI endpoint of a running alicia serve, checked with the official
// @ag-ui/client 1.0.0 and 0.0.58: schemas, the client's own sequencing
// rules, HttpAgent's messages, a second run, errors and abort.
func TestAGUIConformance(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	s, _ := standin.New([]standin.Scenario{
		{Name: "broken", Match: "^break now$", Rounds: []standin.Round{{Reasoning: []string{"About to fail."},
			Answer: "Never completed sentence one. Never two.", Fault: &standin.Fault{Kind: "error", AfterTokens: 8, Message: "GPU fell off the bus"}}}},
		{Name: "slow", Match: "^ponder$", Pacing: &standin.Pacing{TTFTMs: 5, TokenMs: 30}, Rounds: []standin.Round{
			{Reasoning: []string{strings.Repeat("A long thought. ", 100)}, Answer: "Late."}}},
	}, standin.Pacing{TTFTMs: 2, TokenMs: 1}, nil)
	var cancelled atomic.Int32
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Handler().ServeHTTP(w, r)
		if r.Context().Err() != nil {
			cancelled.Add(1)
		}
	}))
	defer model.Close()
	t.Setenv("ALICIA_LLM_URL", model.URL+"/vllm/v1")
	t.Setenv("ALICIA_LLM_MODEL", "Qwen3-8B")
	t.Setenv("ALICIA_DATABASE_URL", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testenv.LogBuffer
	served := make(chan error, 1)
	go func() {
		served <- runServe(ctx, []string{"-http-addr", "127.0.0.1:0", "-livekit-url", lk.URL, "-livekit-api-key", lk.APIKey,
			"-livekit-api-secret", lk.APISecret}, nil, &out, &errOut)
	}()
	addr := waitFor(t, &out, "the HTTP address", regexp.MustCompile(`HTTP API on (http://\S+)`))[1]
	token, _ := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("agui-user").SetValidFor(time.Hour).ToJWT()
	headers := map[string]string{"Authorization": "Bearer " + token}
	input := func(thread, question string, v1 bool) map[string]any {
		in := map[string]any{"threadId": thread, "runId": "run-" + thread, "state": map[string]any{},
			"messages": []any{map[string]any{"id": "u-" + thread, "role": "user", "content": question}},
			"tools":    []any{}, "context": []any{}, "forwardedProps": map[string]any{"reasoning": "full"}}
		if v1 {
			in["protocolVersion"] = "1.0"
		}
		return in
	}
	check := func(t *testing.T, req map[string]any) conformance {
		stdin, _ := json.Marshal(req)
		var r conformance
		if err := json.Unmarshal(testenv.Node(t, stdin, "agui-conformance.mjs"), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("client 1.0", func(t *testing.T) {
		r := check(t, map[string]any{"url": addr + "/agui", "input": input("thread-1", "hello there", true), "agent": true, "headers": headers})
		if r.Status != 200 || !strings.HasPrefix(r.ContentType, "text/event-stream") || r.CRFound || r.BadFrames != 0 {
			t.Fatalf("wire: %d %q CR %v bad frames %d", r.Status, r.ContentType, r.CRFound, r.BadFrames)
		}
		if len(r.SchemaFailures) > 0 || r.VerifyError != nil || len(r.Warnings) > 0 {
			t.Fatalf("schemas %v, verify %v, warnings %v", r.SchemaFailures, r.VerifyError, r.Warnings)
		}
		if r.RunStarted["threadId"] != "thread-1" || r.RunStarted["runId"] != "run-thread-1" || r.Last["type"] != "RUN_FINISHED" {
			t.Fatalf("first %v, last %v", r.RunStarted, r.Last)
		}
		if !slicesContain(r.Types, "REASONING_MESSAGE_CONTENT") || r.AgentFailed != nil || r.SecondRunFailed != nil {
			t.Fatalf("types %v, agent %v, second run %v", r.Types, r.AgentFailed, r.SecondRunFailed)
		}
		roles := map[string]string{}
		for _, m := range r.AgentMessages[:r.FirstRunMessages] {
			if m.Content != nil {
				roles[m.Role] += *m.Content
			}
		}
		if roles["reasoning"] == "" || !strings.Contains(roles["assistant"], "hello there") {
			t.Fatalf("HttpAgent built %+v", roles)
		}
	})
	t.Run("client 0.0.58", func(t *testing.T) {
		r := check(t, map[string]any{"url": addr + "/agui", "input": input("thread-2", "hello again", false), "agent": true, "headers": headers, "client": "0.0.58"})
		if r.AgentFailed != nil || r.AgentRunError != nil || r.SecondRunFailed != nil {
			t.Fatalf("0.0.58: %v %v %v", r.AgentFailed, r.AgentRunError, r.SecondRunFailed)
		}
	})
	t.Run("backend failure, client 0.0.58", func(t *testing.T) {
		r := check(t, map[string]any{"url": addr + "/agui", "input": input("thread-7", "break now", false), "agent": true, "headers": headers, "client": "0.0.58"})
		if r.AgentRunError == nil && r.AgentFailed == nil {
			t.Fatal("the 0.0.58 client saw no error")
		}
	})
	t.Run("backend failure", func(t *testing.T) {
		r := check(t, map[string]any{"url": addr + "/agui", "input": input("thread-3", "break now", true), "headers": headers})
		if r.VerifyError != nil || r.Last["type"] != "RUN_ERROR" || !strings.Contains(r.Last["message"].(string), "GPU fell off the bus") {
			t.Fatalf("last %v (types %v), verify %v", r.Last, r.Types, r.VerifyError)
		}
	})
	t.Run("invalid input", func(t *testing.T) {
		bad := input("thread-4", "x", true)
		delete(bad, "runId")
		if r := check(t, map[string]any{"url": addr + "/agui", "input": bad, "headers": headers}); r.Status != 400 {
			t.Fatalf("missing runId: %d", r.Status)
		}
		if r := check(t, map[string]any{"url": addr + "/agui", "input": input("thread-5", "x", true)}); r.Status != 401 {
			t.Fatalf("no token: %d", r.Status)
		}
	})
	t.Run("abort stops generation", func(t *testing.T) {
		before := cancelled.Load()
		r := check(t, map[string]any{"url": addr + "/agui", "input": input("thread-6", "ponder", true), "headers": headers, "abort": true})
		if !strings.Contains(r.FirstFrame, "RUN_STARTED") || !r.ModelSpoke {
			t.Fatalf("first frame %q, the model's words seen before hanging up: %v", r.FirstFrame, r.ModelSpoke)
		}
		testenv.Eventually(t, "the model to stop generating after the client hung up", func() bool { return cancelled.Load() != before })
	})
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
