package e2e

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

var toolScenarios = []standin.Scenario{
	{Name: "calc", Match: "calculate", Rounds: []standin.Round{
		{Reasoning: []string{"Arithmetic: use the calculator.", "The expression is simple."},
			ToolCalls: []standin.ToolCall{{Name: "calculator", Arguments: map[string]any{"expression": "(3 + 4) * 2.5"}}}},
		{Reasoning: []string{"The calculator answered {{toolResult}}."}, Answer: "The tool says {{toolResult}}. Done."},
	}},
	{Name: "where", Match: "where am i", Rounds: []standin.Round{
		{Reasoning: []string{"Only the device knows."}, ToolCalls: []standin.ToolCall{{Name: "get_location", Arguments: map[string]any{}}}},
		{Reasoning: []string{"Got it."}, Answer: "Your device says {{toolResult}}. Done."},
	}},
	{Name: "two", Match: "both at once", Rounds: []standin.Round{
		{Reasoning: []string{"Two independent lookups."}, ToolCalls: []standin.ToolCall{
			{Name: "get_location", Arguments: map[string]any{}}, {Name: "get_battery", Arguments: map[string]any{}}}},
		{Reasoning: []string{"Both answered."}, Answer: "Done: {{toolResult}}."},
	}},
	{Name: "ponder", Match: "ponder deeply", Pacing: &standin.Pacing{TTFTMs: 5, TokenMs: 15}, Rounds: []standin.Round{
		{Reasoning: []string{"First thought.", strings.Repeat("A long second thought that goes on. ", 30)}, Answer: "Never reached."},
	}},
	{Name: "slow", Match: "tell me a long story", Pacing: &standin.Pacing{TTFTMs: 5, TokenMs: 15}, Rounds: []standin.Round{
		{Reasoning: []string{"A story."}, Answer: strings.Repeat("Once upon a time there was a bot. ", 40)},
	}},
}

// startWithScenarios runs a bot over the stand-in's tool scenarios and
// returns a way to join a room as alice, greeted.
func startWithScenarios(t *testing.T, store storage.Store) func(string) *user {
	lk := testenv.StartLiveKit(t)
	s, _ := standin.New(toolScenarios, standin.Pacing{TTFTMs: 2, TokenMs: 1}, nil)
	model := httptest.NewServer(s.Handler())
	t.Cleanup(model.Close)
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	cfg := startAgent(t, lk, client, store)
	return func(roomName string) *user {
		u := join(t, lk, cfg, roomName, "alice")
		u.greeted()
		return u
	}
}

func bodies[T any](envs []*wire.Envelope) []T {
	var out []T
	for _, e := range envs {
		if b, ok := e.Body.(T); ok {
			out = append(out, b)
		}
	}
	return out
}

func answerText(envs []*wire.Envelope) string {
	var b strings.Builder
	for _, s := range bodies[*wire.AssistantSentence](envs) {
		b.WriteString(s.Text + " ")
	}
	return b.String()
}

func TestServerToolRoundTrip(t *testing.T) {
	joinRoom := startWithScenarios(t, storage.NewMemory(storage.ReasoningPlain))
	u := joinRoom("conv_calc")
	u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming, wire.FeatureReasoningSteps}})
	u.send(&wire.UserMessage{ID: "msg_c", ConversationID: "conv_calc", Content: "calculate (3+4)*2.5"})
	got := u.until("the answer", finalSentence)
	reqs, results := bodies[*wire.ToolUseRequest](got), bodies[*wire.ToolUseResult](got)
	if len(reqs) != 1 || reqs[0].Execution != wire.ExecutionServer || reqs[0].ToolName != "calculator" ||
		len(results) != 1 || !results[0].Success || results[0].RequestID != reqs[0].ID {
		t.Fatalf("requests %+v results %+v", reqs, results)
	}
	if !strings.Contains(answerText(got), "17.5") {
		t.Fatalf("answer %q does not carry the tool's result", answerText(got))
	}
	// Steps count on across the tool round: 1, 2, then 3.
	var idx []int32
	for _, st := range bodies[*wire.ReasoningStep](got) {
		idx = append(idx, st.StepIndex)
	}
	if len(idx) != 3 || idx[2] != 3 {
		t.Fatalf("step indexes %v", idx)
	}
	// Order: steps 1-2, the tool request and result, step 3, the answer.
	order := ""
	for _, e := range got {
		switch e.Body.(type) {
		case *wire.ReasoningStep:
			order += "R"
		case *wire.ToolUseRequest:
			order += "Q"
		case *wire.ToolUseResult:
			order += "A"
		case *wire.StartAnswer:
			order += "S"
		}
	}
	if order != "RRQARS" {
		t.Fatalf("order %s", order)
	}
}

func TestClientToolRoundTripAndTimeout(t *testing.T) {
	joinRoom := startWithScenarios(t, storage.NewMemory(storage.ReasoningPlain))
	for _, c := range []struct {
		name    string
		timeout int32
		reply   bool
		want    string
	}{
		{"answered", 5000, true, "Lyon"},
		{"timeout", 300, false, "did not answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := joinRoom("conv_where_" + c.name)
			u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming},
				Tools: []wire.ClientTool{{Name: "get_location", Description: "where the device is", TimeoutMs: c.timeout}}})
			// Asked before the message is sent: the request it brings and the
			// answer after the timeout may reach the client together (the
			// bot's first packets can wait for its data channel to open), but
			// the answer cannot come sooner than the timeout after the question.
			asked := time.Now()
			u.send(&wire.UserMessage{ID: "msg_w", ConversationID: u.room.Name(), Content: "where am i?"})
			got := u.until("the tool request", func(g []*wire.Envelope) bool { return has[*wire.ToolUseRequest](g) > 0 })
			req := bodies[*wire.ToolUseRequest](got)[0]
			if req.Execution != wire.ExecutionClient || req.ToolName != "get_location" || req.TimeoutMs != c.timeout {
				t.Fatalf("request %+v", req)
			}
			if c.reply {
				u.send(&wire.ToolUseResult{RequestID: req.ID, Success: true, Result: map[string]any{"city": "Lyon"}})
			}
			got = u.until("the answer", finalSentence)
			if !strings.Contains(answerText(got), c.want) {
				t.Fatalf("answer %q, want it to mention %q", answerText(got), c.want)
			}
			if !c.reply && time.Since(asked) < time.Duration(c.timeout)*time.Millisecond {
				t.Fatal("the answer did not wait for the timeout")
			}
		})
	}
}

// ControlStop stops the answer at once: the model stream is cancelled,
// the last sentence is marked final, the stop is acknowledged.
func TestStopMidAnswer(t *testing.T) {
	joinRoom := startWithScenarios(t, storage.NewMemory(storage.ReasoningPlain))
	u := joinRoom("conv_stop")
	u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
	u.send(&wire.UserMessage{ID: "msg_s", ConversationID: "conv_stop", Content: "tell me a long story"})
	u.until("a few sentences", func(g []*wire.Envelope) bool { return has[*wire.AssistantSentence](g) >= 3 })
	sent := time.Now()
	u.send(&wire.ControlStop{ConversationID: "conv_stop", StopType: wire.StopGeneration})
	got := u.until("the stop's acknowledgement", func(g []*wire.Envelope) bool {
		for _, a := range bodies[*wire.Acknowledgement](g) {
			if a.Notes == "stopped" {
				return true
			}
		}
		return false
	})
	elapsed := time.Since(sent)
	sentences := bodies[*wire.AssistantSentence](got)
	if !sentences[len(sentences)-1].IsFinal || len(sentences) > 35 {
		t.Fatalf("%d sentences, last final: %v", len(sentences), sentences[len(sentences)-1].IsFinal)
	}
	after := bodies[*wire.AssistantSentence](u.barrier())
	if len(after) != len(sentences) {
		t.Fatalf("%d sentences after the stop", len(after)-len(sentences))
	}
	t.Logf("ControlStop sent → acknowledgement received (final sentence before it): %v, round trip over LiveKit included", elapsed)
}

// Two tool calls of one response run at once: the client holds the first
// until the second has been asked for, which only concurrency allows.
func TestToolCallsRunConcurrently(t *testing.T) {
	joinRoom := startWithScenarios(t, storage.NewMemory(storage.ReasoningPlain))
	u := joinRoom("conv_two")
	u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}, Tools: []wire.ClientTool{
		{Name: "get_location", TimeoutMs: 5000}, {Name: "get_battery", TimeoutMs: 5000}}})
	u.send(&wire.UserMessage{ID: "msg_2", ConversationID: "conv_two", Content: "both at once"})
	got := u.until("both requests before any answer", func(g []*wire.Envelope) bool { return has[*wire.ToolUseRequest](g) == 2 })
	reqs := bodies[*wire.ToolUseRequest](got)
	u.send(&wire.ToolUseResult{RequestID: reqs[1].ID, Success: true, Result: map[string]any{"battery": 80}})
	u.send(&wire.ToolUseResult{RequestID: reqs[0].ID, Success: true, Result: map[string]any{"city": "Lyon"}})
	u.until("the answer", finalSentence)
}

// A stop during the reasoning ends the turn before any answer.
func TestStopMidReasoning(t *testing.T) {
	joinRoom := startWithScenarios(t, storage.NewMemory(storage.ReasoningPlain))
	u := joinRoom("conv_ponder")
	u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming, wire.FeatureReasoningSteps}})
	u.send(&wire.UserMessage{ID: "msg_p", ConversationID: "conv_ponder", Content: "ponder deeply"})
	u.until("the first step", func(g []*wire.Envelope) bool { return has[*wire.ReasoningStep](g) >= 1 })
	u.send(&wire.ControlStop{ConversationID: "conv_ponder", StopType: wire.StopAll})
	got := u.until("the acknowledgement", func(g []*wire.Envelope) bool {
		for _, a := range bodies[*wire.Acknowledgement](g) {
			if a.Notes == "stopped" {
				return true
			}
		}
		return false
	})
	after := u.barrier()
	if has[*wire.StartAnswer](after) != 0 || has[*wire.ReasoningStep](after) != has[*wire.ReasoningStep](got) {
		t.Fatalf("after the stop: %d answers, %d steps (%d before)", has[*wire.StartAnswer](after), has[*wire.ReasoningStep](after), has[*wire.ReasoningStep](got))
	}
}
