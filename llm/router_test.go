package llm_test

import (
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
)

// newModelRouter serves the model name "assistant" from one of two
// stand-ins, a 2504 hybrid and a Thinking-2507, as a router or a gateway
// alias in front of two deployments does; the model-information
// endpoints are hidden, as a gateway that forwards only chat completions
// hides them.
func newModelRouter(t *testing.T) *testenv.RoutedModel {
	return testenv.NewRoutedModel(t, testScenarios...)
}

// applied is a turn as a caller that honours retractions keeps it: the
// reasoning, the answer, and the text the answer lost.
func applied(events []llm.Event) (reasoning, answer, retracted string) {
	var r, a, x strings.Builder
	for _, ev := range events {
		switch ev.Kind {
		case llm.EventReasoning:
			r.WriteString(ev.Text)
		case llm.EventText:
			a.WriteString(ev.Text)
		case llm.EventRetract:
			s := a.String()
			if !strings.HasSuffix(s, ev.Text) {
				return r.String(), s, "RETRACTED TEXT NOT AT THE ANSWER'S END: " + ev.Text
			}
			a.Reset()
			a.WriteString(strings.TrimSuffix(s, ev.Text))
			x.WriteString(ev.Text)
		case llm.EventError:
			a.WriteString(" ERROR " + ev.Err.Error())
		}
	}
	return r.String(), a.String(), x.String()
}

// A model name that showed inline <think> tags, then streams a
// Thinking-2507 answer (reasoning, a bare </think>, the answer): the text
// before the tag is taken back from the answer and given as reasoning.
func TestBareThinkEndAfterInlineTagsIsRetracted(t *testing.T) {
	r := newModelRouter(t)
	for _, p := range []string{"vllm-noparser", "vllm-mtp", "llamacpp-none"} {
		t.Run(p, func(t *testing.T) {
			c, err := llm.New(llm.Config{Backend: "openai", URL: r.URL + "/" + p + "/v1", Model: "assistant"})
			if err != nil {
				t.Fatal(err)
			}
			r.Thinking.Store(false)
			req := &llm.Request{Messages: user("plain question"), Thinking: true}
			reasoning, answer, retracted := applied(collect(t, c, req))
			checkAnswer(t, reasoning, answer)
			if retracted != "" {
				t.Fatalf("hybrid turn: %q retracted", retracted)
			}

			// The thinking-off turn is where the name's memory matters:
			// with thinking on either template shows a tag first.
			r.Thinking.Store(true)
			req = &llm.Request{Messages: user("plain question")}
			events := collect(t, c, req)
			reasoning, answer, retracted = applied(events)
			checkAnswer(t, reasoning, answer)
			if !strings.Contains(retracted, "plain question") {
				t.Fatalf("retracted %q; events %v", retracted, events)
			}
			// The retraction comes before the answer's first word.
			for _, ev := range events {
				if ev.Kind == llm.EventRetract {
					break
				}
				if ev.Kind == llm.EventText && strings.Contains(ev.Text, "42.") && strings.Contains(ev.Text, "answer is") {
					t.Fatalf("the answer streamed before the retraction: %v", events)
				}
			}
		})
	}
}

// The memory follows what each turn shows: after a bare </think> the
// name's next turn reads reasoning from the first token, and after inline
// tags again a template-less answer streams as it comes.
func TestThinkMemoryFollowsTheLastTemplateSeen(t *testing.T) {
	r := newModelRouter(t)
	c, err := llm.New(llm.Config{Backend: "openai", URL: r.URL + "/vllm-noparser/v1", Model: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	turn := func(thinkingModel, thinking bool) (reasoning, answer, retracted string, texts int) {
		t.Helper()
		r.Thinking.Store(thinkingModel)
		events := collect(t, c, &llm.Request{Messages: user("plain question"), Thinking: thinking})
		for _, ev := range events {
			if ev.Kind == llm.EventText {
				texts++
			}
		}
		reasoning, answer, retracted = applied(events)
		return
	}
	// First a Thinking-2507 turn teaches "opens"; the next one reads it
	// as reasoning from the first token, nothing retracted.
	turn(true, true)
	reasoning, answer, retracted, _ := turn(true, false)
	checkAnswer(t, reasoning, answer)
	if retracted != "" {
		t.Fatalf("the template was known to open <think>, yet %q was retracted", retracted)
	}
	// The hybrid behind the same name shows inline tags: it was never
	// misread (a <think> in reasoning is dropped), and it is remembered.
	reasoning, answer, retracted, _ = turn(false, true)
	checkAnswer(t, reasoning, answer)
	if retracted != "" {
		t.Fatalf("hybrid turn: %q retracted", retracted)
	}
	// With thinking off the hybrid writes the answer alone, no tag: it
	// must stream, not be taken for reasoning.
	_, answer, _, texts := turn(false, false)
	if answer != plainAnswer || texts < 3 {
		t.Fatalf("thinking off after both templates: answer %q in %d events", answer, texts)
	}
	// And the Thinking-2507 model, with thinking on, is read right from
	// its first token now that the name is known to serve both.
	reasoning, answer, retracted, _ = turn(true, true)
	checkAnswer(t, reasoning, answer)
	if retracted != "" {
		t.Fatalf("thinking on, name serving both: %q retracted", retracted)
	}
}
