package standin_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
)

type aguiReport struct {
	Status           int
	ContentType      string
	CRFound          bool
	BadFrames        int
	Types            []string
	SchemaFailures   []string
	VerifyError      *string
	Warnings         []string
	RunStarted       map[string]any
	Last             map[string]any
	AgentFailed      *string
	AgentRunError    *string
	FirstRunMessages int
	AgentMessages    []struct {
		ID, Role       string
		Content        *string
		EncryptedValue *string
	}
}

// The stand-in's AG-UI profiles emit event sequences that the official
// @ag-ui/client 1.0.0 accepts: every event passes its schemas and the
// client's own enforce, transformChunks and verify pipeline, and HttpAgent
// builds the reasoning and assistant messages from them.
func TestAGUIProfilesPassTheOfficialClient(t *testing.T) {
	s, err := standin.New([]standin.Scenario{
		{Name: "weather", Match: "weather", Rounds: []standin.Round{{
			Reasoning: []string{"Forecast needed."}, Encrypted: "enc-r1",
			ToolCalls: []standin.ToolCall{{Name: "get_weather", Arguments: map[string]any{"city": "Lyon"}, Encrypted: "enc-t1"}}}}},
		{Name: "broken", Match: "broken", Rounds: []standin.Round{{Reasoning: []string{"About to fail."}, Answer: "never",
			Fault: &standin.Fault{Kind: "error", AfterTokens: 2, Message: "GPU fell off the bus"}}}},
	}, standin.Pacing{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for _, profile := range []string{"agui", "agui-chunks", "agui-thinking"} {
		for _, question := range []string{"hello there", "weather in Lyon?", "broken"} {
			t.Run(profile+"/"+question, func(t *testing.T) {
				input := map[string]any{
					"threadId": "thread-1", "runId": "run-1", "protocolVersion": "1.0", "state": map[string]any{},
					"messages": []any{map[string]any{"id": "u1", "role": "user", "content": question}},
					"tools":    []any{}, "context": []any{}, "forwardedProps": map[string]any{},
				}
				stdin, _ := json.Marshal(map[string]any{"url": ts.URL + "/" + profile + "/agui", "input": input, "agent": true})
				var r aguiReport
				if err := json.Unmarshal(testenv.Node(t, stdin, "agui-conformance.mjs"), &r); err != nil {
					t.Fatal(err)
				}
				if r.Status != 200 || !strings.HasPrefix(r.ContentType, "text/event-stream") || r.CRFound || r.BadFrames != 0 {
					t.Fatalf("wire: status %d, %q, CR %v, %d bad frames", r.Status, r.ContentType, r.CRFound, r.BadFrames)
				}
				// Deprecated THINKING_* events are outside the 1.0 schemas: only
				// HttpAgent's compatibility layer reads them (checked below).
				if profile != "agui-thinking" {
					if len(r.SchemaFailures) > 0 {
						t.Errorf("%d events fail EventSchemas, the first: %s", len(r.SchemaFailures), r.SchemaFailures[0])
					}
					if r.VerifyError != nil {
						t.Errorf("the client's pipeline failed: %s", *r.VerifyError)
					}
					for _, w := range r.Warnings {
						t.Errorf("client warning: %s", w)
					}
				}
				if r.RunStarted["threadId"] != "thread-1" || r.RunStarted["runId"] != "run-1" {
					t.Errorf("RUN_STARTED does not echo the input: %v", r.RunStarted)
				}
				wantLast := "RUN_FINISHED"
				if question == "broken" {
					wantLast = "RUN_ERROR"
				}
				if r.Last["type"] != wantLast {
					t.Errorf("last event %v, want %s (types %v)", r.Last, wantLast, r.Types)
				}
				roles := map[string]string{}
				first := r.AgentMessages
				if r.FirstRunMessages > 0 {
					first = first[:r.FirstRunMessages]
				}
				for _, m := range first {
					if m.Content != nil {
						roles[m.Role] += *m.Content
					}
					if m.Role == "reasoning" && question == "weather in Lyon?" && profile != "agui-thinking" && (m.EncryptedValue == nil || *m.EncryptedValue != "enc-r1") {
						t.Errorf("reasoning message lost its encrypted value: %+v", m)
					}
				}
				if question == "broken" {
					if r.AgentRunError == nil || !strings.Contains(*r.AgentRunError, "GPU fell off the bus") {
						t.Errorf("HttpAgent did not report the run error: %v", r.AgentRunError)
					}
					return
				}
				if r.AgentFailed != nil {
					t.Fatalf("HttpAgent failed: %s", *r.AgentFailed)
				}
				if roles["reasoning"] == "" {
					t.Errorf("HttpAgent built no reasoning message: %+v", r.AgentMessages)
				}
				if question == "hello there" && !strings.Contains(roles["assistant"], "stand-in") {
					t.Errorf("HttpAgent built no assistant answer: %+v", r.AgentMessages)
				}
			})
		}
	}
}

func TestTokenizeKeepsEveryByte(t *testing.T) {
	s := "Okay, the user's 3<4 \"question\"\twith 24 °C, naïve café… and\n\nnew\r\nlines  end "
	if got := strings.Join(standin.Tokenize(s), ""); got != s {
		t.Fatalf("tokens rejoin to %q", got)
	}
}

func TestShippedScenariosLoad(t *testing.T) {
	scenarios, err := standin.LoadScenarios("scenarios")
	if err != nil {
		t.Fatal(err)
	}
	if len(scenarios) < 3 {
		t.Fatalf("loaded %d scenarios", len(scenarios))
	}
	if _, err := standin.New(scenarios, standin.Pacing{}, nil); err != nil {
		t.Fatal(err)
	}
}
