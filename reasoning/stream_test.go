package reasoning

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// One decision feeds both faces: a stream reader gets its steps as
// streams at its own level, a packet reader as ReasoningSteps, and
// nobody whose preference is off gets either.
func TestStreamsFollowThePreference(t *testing.T) {
	viewers := []Viewer{
		{Identity: "full", Mode: ModeFull, Streams: true},
		{Identity: "summary", Mode: ModeSummary, Streams: true},
		{Identity: "off", Mode: ModeOff, Streams: true},
		{Identity: "packets", Mode: ModeFull, Partial: true},
	}
	var parts []StreamPart
	var packets []Delivery
	d := NewDeliverer(func() []Viewer { return viewers }, func(p Delivery) { packets = append(packets, p) })
	d.StreamTo(func(p StreamPart) { parts = append(parts, p) })
	c := NewChain("conv_1", "msg_user", "msg_answer", d)
	now := time.Unix(1_800_000_000, 0)
	first := "The user asks about tides. The moon pulls the sea, and the earth turns under the bulge."
	for _, tok := range strings.SplitAfter(first+"\n\nI will answer in two sentences.", " ") {
		now = now.Add(20 * time.Millisecond)
		c.Reasoning(tok, "", now)
		if next := d.Poll(now); !next.IsZero() && next.Before(now) {
			t.Fatal("a due update was not sent")
		}
	}
	c.End(now)

	streams := map[string]string{} // step/level → text
	opened, closed := map[string]bool{}, map[string]bool{}
	for _, p := range parts {
		key := p.StepID + "/" + string(p.Level)
		if slices.Contains(p.To, "off") || slices.Contains(p.To, "packets") {
			t.Fatalf("a stream went to %v", p.To)
		}
		want := map[Mode]string{ModeFull: "full", ModeSummary: "summary"}[p.Level]
		if len(p.To) != 1 || p.To[0] != want {
			t.Fatalf("a %s stream went to %v", p.Level, p.To)
		}
		if p.Open == opened[key] || closed[key] {
			t.Fatalf("stream %s: open %v after opened %v, closed %v", key, p.Open, opened[key], closed[key])
		}
		opened[key] = true
		closed[key] = p.Close
		streams[key] += p.Text
		if p.PreviousID != "msg_user" || p.MessageID != "msg_answer" {
			t.Fatalf("part %+v", p)
		}
	}
	steps := c.Steps()
	if len(steps) != 2 {
		t.Fatalf("%d steps", len(steps))
	}
	for _, s := range steps {
		if got := streams[s.ID+"/full"]; got != s.Content {
			t.Errorf("full stream of step %d: %q, want %q", s.Index, got, s.Content)
		}
		if got := streams[s.ID+"/summary"]; got != Summarize(s.Content) {
			t.Errorf("summary stream of step %d: %q", s.Index, got)
		}
		if !closed[s.ID+"/full"] || !closed[s.ID+"/summary"] {
			t.Errorf("step %d's streams not closed", s.Index)
		}
	}
	if streams[steps[0].ID+"/summary"] != "The user asks about tides." {
		t.Errorf("summary %q", streams[steps[0].ID+"/summary"])
	}
	// The full stream grew in several writes, throttled like partials.
	writes := 0
	for _, p := range parts {
		if p.StepID == steps[0].ID && p.Level == ModeFull && p.Text != "" {
			writes++
		}
	}
	if writes < 2 || writes > len(strings.Fields(first)) {
		t.Errorf("step 1's full stream took %d writes", writes)
	}
	for _, p := range packets {
		if !slices.Equal(p.To, []string{"packets"}) {
			t.Fatalf("a ReasoningStep went to %v", p.To)
		}
	}
	if len(packets) == 0 {
		t.Fatal("the packet reader got nothing")
	}
}

// A Deliverer without a stream face sends stream readers nothing, and
// does not count them among the packet readers.
func TestNoStreamFaceNoStreams(t *testing.T) {
	var packets []Delivery
	d := NewDeliverer(func() []Viewer { return []Viewer{{Identity: "reader", Mode: ModeFull, Streams: true}} },
		func(p Delivery) { packets = append(packets, p) })
	c := NewChain("conv_1", "msg_user", "msg_answer", d)
	c.Reasoning("Thinking about it.", "", time.Now())
	c.End(time.Now())
	if len(packets) != 0 {
		t.Fatalf("packets %+v", packets)
	}
}
