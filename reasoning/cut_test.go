package reasoning

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/alicia-voice/alicia/wire/agui"
)

func eventTypes(events []agui.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, string(e.Type))
	}
	return out
}

// A cut inside a step keeps the step as it stands, marked cut short, in
// every face: its final ReasoningStep, its stored form, and an AG-UI
// span that closes.
func TestCutInsideAStep(t *testing.T) {
	h := newHarness(Viewer{Identity: "alice", Mode: ModeFull}, Viewer{Identity: "bob", Mode: ModeSummary})
	h.feed("First I read it.", "\n\n", "Then I weigh the two read", "ings of")
	h.chain.Cut(h.now)
	if got := contents(h.chain.Steps()); !slices.Equal(got, []string{"First I read it.", "Then I weigh the two readings of"}) {
		t.Fatalf("steps %q", got)
	}
	var final []bool
	for _, d := range h.deliveries {
		if !d.Step.Partial {
			final = append(final, d.Step.CutShort)
		}
	}
	// Two audiences (full and summary) per step.
	if !slices.Equal(final, []bool{false, false, true, true}) {
		t.Fatalf("cutShort of the final steps sent: %v", final)
	}
	if len(h.sealed) != 2 || h.sealed[0].CutShort || !h.sealed[1].CutShort {
		t.Fatalf("stored %+v", h.sealed)
	}
	types := eventTypes(h.events)
	want := []string{"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END",
		"REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "CUSTOM", "REASONING_END"}
	if !slices.Equal(types, want) {
		t.Fatalf("AG-UI events %v", types)
	}
	custom := h.events[len(h.events)-2]
	var v map[string]string
	if custom.Name != agui.CustomReasoningCutShort || json.Unmarshal(custom.Value, &v) != nil || v["messageId"] != h.chain.Steps()[1].ID {
		t.Fatalf("custom event %+v", custom)
	}
	run := append([]agui.Event{{Type: agui.RunStarted, ThreadID: "t", RunID: "r"}}, h.events...)
	if err := agui.CheckAll(append(run, agui.Event{Type: agui.RunFinished, ThreadID: "t", RunID: "r"})); err != nil {
		t.Fatal(err)
	}
}

// A cut between steps (every step complete and out) adds a marker step:
// the last step says the reasoning was cut short.
func TestCutBetweenSteps(t *testing.T) {
	h := newHarness(Viewer{Identity: "alice", Mode: ModeFull})
	h.feed("First I read it.", "\n\n")
	h.chain.Cut(h.now)
	steps := h.chain.Steps()
	if got := contents(steps); !slices.Equal(got, []string{"First I read it.", CutMarker}) || steps[0].CutShort || !steps[1].CutShort || steps[1].Index != 2 {
		t.Fatalf("steps %+v", steps)
	}
	last := h.deliveries[len(h.deliveries)-1].Step
	if last.Content != CutMarker || !last.CutShort || last.Partial {
		t.Fatalf("last step sent %+v", last)
	}
	if len(h.sealed) != 2 || !h.sealed[1].CutShort {
		t.Fatalf("stored %+v", h.sealed)
	}
	if types := eventTypes(h.events); types[len(types)-1] != "REASONING_END" || !slices.Contains(types, "CUSTOM") {
		t.Fatalf("AG-UI events %v", types)
	}
}

// A cut before any reasoning came still tells that the thinking was cut.
func TestCutBeforeAnyReasoning(t *testing.T) {
	h := newHarness(Viewer{Identity: "alice", Mode: ModeFull})
	h.chain.Cut(h.now)
	if steps := h.chain.Steps(); len(steps) != 1 || steps[0].Content != CutMarker || !steps[0].CutShort || steps[0].Index != 1 {
		t.Fatalf("steps %+v", steps)
	}
	if types := eventTypes(h.events); !slices.Equal(types, []string{"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT",
		"REASONING_MESSAGE_END", "CUSTOM", "REASONING_END"}) {
		t.Fatalf("AG-UI events %v", types)
	}
	// Later reasoning (a model that cannot stop thinking) goes on counting.
	h.feed("More.")
	h.chain.End(h.now)
	if steps := h.chain.Steps(); len(steps) != 2 || steps[1].Index != 2 || steps[1].CutShort {
		t.Fatalf("steps after the cut %+v", steps)
	}
}
