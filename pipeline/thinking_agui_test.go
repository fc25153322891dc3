package pipeline_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	aguiface "github.com/alicia-voice/alicia/pipeline/agui"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire/agui"
)

// An AG-UI run chooses its thinking in forwardedProps.thinking; reasoning
// cut by the budget ends its span with a CUSTOM event saying so, then
// REASONING_END, before the answer.
func TestAGUIRunThinkingChoice(t *testing.T) {
	base, rec := startThinkingStandin(t, standin.Pacing{TTFTMs: 5, TokenMs: 5})
	client, err := llm.New(oa("vllm", llm.FlavorGeneric)(base))
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewMemory(storage.ReasoningPlain)
	e := pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true, ThinkingPolicy: &pipeline.ThinkingPolicy{
		Typed:  pipeline.Thinking{Mode: pipeline.ThinkingBudget, Budget: pipeline.Budget{Duration: 300 * time.Millisecond}},
		Spoken: pipeline.Thinking{Mode: pipeline.ThinkingOff},
	}}, store)
	api := httptest.NewServer(aguiface.New(e, store, asCaller))
	defer api.Close()
	run := func(thread, thinking string) []agui.Event {
		body := `{"threadId":"` + thread + `","runId":"r1","messages":[{"id":"u1","role":"user","content":"A hard one: is it so?"}],` +
			`"forwardedProps":{"reasoning":"full","thinking":"` + thinking + `"}}`
		req, _ := http.NewRequest(http.MethodPost, api.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer nell")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		return testenv.AGUIEvents(t, res.Body)
	}
	types := func(events []agui.Event) []agui.EventType {
		var out []agui.EventType
		for _, ev := range events {
			out = append(out, ev.Type)
		}
		return out
	}

	events := run("t1", "budget")
	ty := types(events)
	custom := slices.Index(ty, agui.Custom)
	end := slices.Index(ty, agui.ReasoningEnd)
	text := slices.Index(ty, agui.TextMessageStart)
	if custom < 0 || events[custom].Name != agui.CustomReasoningCutShort || end != custom+1 || text < end {
		t.Fatalf("events %v", ty)
	}
	reqs := rec.all()
	if follow := reqs[len(reqs)-1]; follow["continue_final_message"] != true {
		t.Fatalf("no continuation after the cut: %v", follow)
	}

	before := len(rec.all())
	if ty := types(run("t2", "off")); slices.Contains(ty, agui.ReasoningMessageStart) {
		t.Fatalf("reasoning with thinking off: %v", ty)
	}
	reqs = rec.all()
	if len(reqs) != before+1 {
		t.Fatalf("%d requests for a turn without thinking", len(reqs)-before)
	}
	if on, _ := thinkingSwitch(reqs[before]); on {
		t.Fatalf("thinking asked for: %v", reqs[before])
	}
}
