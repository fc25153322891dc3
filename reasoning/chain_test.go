package reasoning

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/wire"
	"github.com/alicia-voice/alicia/wire/agui"
)

// harness wires a Chain to all three faces and records what each saw.
type harness struct {
	chain      *Chain
	deliveries []Delivery
	events     []agui.Event
	sealed     []Step
	viewers    []Viewer
	now        time.Time
}

func newHarness(viewers ...Viewer) *harness {
	h := &harness{viewers: viewers, now: time.Unix(1_800_000_000, 0)}
	d := NewDeliverer(func() []Viewer { return h.viewers }, func(d Delivery) { h.deliveries = append(h.deliveries, d) })
	a := NewAGUIEvents(ModeFull, func(e agui.Event) { h.events = append(h.events, e) })
	h.chain = NewChain("conv_1", "msg_user", "msg_assistant", d, a, OnSealed(func(s Step) { h.sealed = append(h.sealed, s) }))
	return h
}

func (h *harness) feed(parts ...string) {
	for _, p := range parts {
		h.now = h.now.Add(10 * time.Millisecond)
		h.chain.Reasoning(p, "", h.now)
	}
}

func contents(steps []*Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Content
	}
	return out
}

// randomReasoning builds paragraphs (lines with single newlines inside,
// indentation, trailing spaces, unicode, things that look like breaks but
// are not) separated by one or more blank lines, with the leading and
// trailing newlines Qwen3 writes around its thinking.
func randomReasoning(rng *rand.Rand) (raw string, paragraphs []string) {
	words := []string{"the", "user", "asks", "about", "Lyon;", "3.5", "°C", "—", "naïve", "<b>", "x\ty", "so", "I", "should", "call", "it."}
	n := 1 + rng.IntN(6)
	for range n {
		var p strings.Builder
		if rng.IntN(4) == 0 {
			p.WriteString("  ")
		}
		for l := range 1 + rng.IntN(3) {
			if l > 0 {
				p.WriteString("\n")
				if rng.IntN(3) == 0 {
					p.WriteString("- ")
				}
			}
			for w := range 1 + rng.IntN(12) {
				if w > 0 {
					p.WriteString(" ")
				}
				p.WriteString(words[rng.IntN(len(words))])
			}
			if rng.IntN(5) == 0 {
				p.WriteString(" ") // trailing space inside a paragraph
			}
		}
		paragraphs = append(paragraphs, p.String())
	}
	seps := []string{"\n\n", "\n\n\n", "\n \n", "\n\t\n\n", "\n\n  \n"}
	var b strings.Builder
	b.WriteString([]string{"", "\n", "\n\n"}[rng.IntN(3)])
	for i, p := range paragraphs {
		if i > 0 {
			b.WriteString(seps[rng.IntN(len(seps))])
		}
		b.WriteString(p)
	}
	b.WriteString([]string{"", "\n", "\n\n", "\n \n"}[rng.IntN(4)])
	return b.String(), paragraphs
}

func cutRandomly(rng *rand.Rand, s string) []string {
	var parts []string
	for len(s) > 0 {
		n := min(len(s), 1+rng.IntN(8))
		parts = append(parts, s[:n])
		s = s[n:]
	}
	return parts
}

// For random reasoning cut into random deltas: the steps joined with blank
// lines give back the reasoning; indexes run 1..n; every step names the
// user message; the AG-UI events pass the client's rules and carry the
// same ids and text as the ReasoningStep packets.
func TestChainProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		raw, paragraphs := randomReasoning(rng)
		h := newHarness(Viewer{Identity: "full", Mode: ModeFull})
		h.events = append(h.events, agui.Event{Type: agui.RunStarted, ThreadID: "t", RunID: "r"})
		h.feed(cutRandomly(rng, raw)...)
		h.chain.End(h.now)
		h.events = append(h.events, agui.Event{Type: agui.RunFinished, ThreadID: "t", RunID: "r"})

		steps := h.chain.Steps()
		got := strings.Join(contents(steps), "\n\n")
		if want := strings.Join(paragraphs, "\n\n"); got != want {
			t.Fatalf("iteration %d: steps join to\n%q\nwant\n%q\nfrom %q", iter, got, want, raw)
		}
		for i, s := range steps {
			if s.Index != int32(i+1) || s.PreviousID != "msg_user" || s.MessageID != "msg_assistant" || s.ConversationID != "conv_1" {
				t.Fatalf("step %d: %+v", i, s)
			}
			if strings.TrimSpace(s.Content) == "" {
				t.Fatalf("blank step %q", s.Content)
			}
		}
		if len(h.sealed) != len(steps) {
			t.Fatalf("%d steps, %d sealed for storage", len(steps), len(h.sealed))
		}
		if err := agui.CheckAll(h.events); err != nil {
			t.Fatalf("AG-UI stream breaks the client's rules: %v", err)
		}
		// AG-UI message text and id equal the final ReasoningStep's.
		byID := map[string]string{}
		for _, e := range h.events {
			if e.Type == agui.ReasoningMessageContent {
				byID[e.MessageID] += e.Delta
			}
		}
		finals := 0
		for _, d := range h.deliveries {
			if d.Step.Partial {
				continue
			}
			finals++
			if byID[d.Step.ID] != d.Step.Content {
				t.Fatalf("AG-UI message %s is %q, ReasoningStep says %q", d.Step.ID, byID[d.Step.ID], d.Step.Content)
			}
		}
		if finals != len(steps) || len(byID) != len(steps) {
			t.Fatalf("%d steps, %d packets, %d AG-UI messages", len(steps), finals, len(byID))
		}
	}
}

func TestStepBoundaries(t *testing.T) {
	h := newHarness()
	h.feed("\nFirst thought, ", "still first.\n", "\nSecond", " thought.\n\n\n\n  Third, indented.\n")
	h.chain.ToolCall("call_7", h.now)
	h.feed("\nAfter the tool: fourth.\n")
	h.chain.End(h.now)
	got := contents(h.chain.Steps())
	want := []string{"First thought, still first.", "Second thought.", "  Third, indented.", "After the tool: fourth."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("steps %q", got)
	}
	steps := h.chain.Steps()
	if steps[2].ToolCallID != "call_7" || steps[1].ToolCallID != "" || steps[3].Index != 4 {
		t.Fatalf("tool call id or index: %+v %+v %+v", steps[1], steps[2], steps[3])
	}
	if len(h.sealed) != 4 || h.sealed[2].ToolCallID != "call_7" {
		t.Fatalf("sealed %+v", h.sealed)
	}
}

// Backends with message ids (AG-UI) bound steps by their messages and
// attach encrypted values to them; LiveKit clients never see the value.
func TestMessageBoundariesAndEncryptedValues(t *testing.T) {
	h := newHarness(Viewer{Identity: "u", Mode: ModeFull})
	now := h.now
	h.chain.Reasoning("One message,", "rm1", now)
	h.chain.Reasoning(" one step", "rm1", now)
	h.chain.EndMessage("rm1", now)
	h.chain.Encrypted("rm1", "opaque-1", now)
	h.chain.Reasoning("A second message", "rm2", now)
	h.chain.Reasoning("A third, with no end event", "rm3", now)
	h.chain.End(now)
	steps := h.chain.Steps()
	if got := contents(steps); strings.Join(got, "|") != "One message, one step|A second message|A third, with no end event" {
		t.Fatalf("steps %q", got)
	}
	if steps[0].EncryptedValue != "opaque-1" || steps[0].SourceMessageID != "rm1" || h.sealed[0].EncryptedValue != "opaque-1" {
		t.Fatalf("encrypted value not kept with its step: %+v / %+v", steps[0], h.sealed[0])
	}
	for _, d := range h.deliveries {
		b, _ := wire.Marshal(&wire.Envelope{StanzaID: -1, ConversationID: "c", Body: d.Step})
		if strings.Contains(string(b), "opaque-1") {
			t.Fatal("an encrypted value reached a LiveKit packet")
		}
	}
	found := false
	for _, e := range h.events {
		if e.Type == agui.ReasoningEncryptedValue && e.EntityID == steps[0].ID && e.EncryptedValue == "opaque-1" {
			found = true
		}
	}
	if !found {
		t.Fatal("the AG-UI stream did not carry the encrypted value on the step's message")
	}
}

func TestSummarize(t *testing.T) {
	long := strings.Repeat("word ", 60)
	for in, want := range map[string]string{
		"The user wants the weather. Then I call the tool.":      "The user wants the weather.",
		"Is it 3.5 °C? Probably.":                                "Is it 3.5 °C?",
		"Use e.g. the forecast tool, i.e. call it. Then answer.": "Use e.g. the forecast tool, i.e. call it.",
		"Dr. Smith said so. Ok.":                                 "Dr. Smith said so.",
		"See https://example.com/a.b now. Next.":                 "See https://example.com/a.b now.",
		"No terminator at all":                                   "No terminator at all",
		"  Leading space.\nSecond line.":                         "Leading space.",
		"First line without a stop\n\nSecond paragraph.":         "First line without a stop",
		"He said \"stop.\" Then left.":                           "He said \"stop.\"",
		long:                                                     strings.TrimSpace(strings.Repeat("word ", 32)) + "…",
		"Ünïcödé " + strings.Repeat("é", 200) + " end.":          "Ünïcödé…",
	} {
		got := Summarize(in)
		if got != want {
			t.Errorf("Summarize(%q)\n got %q\nwant %q", in, got, want)
		}
		if n := len([]rune(got)); n > SummaryMaxRunes {
			t.Errorf("summary of %d characters", n)
		}
	}
}

// Each viewer gets its form; a viewer with off gets nothing; a change of
// preference mid-turn applies from the next step on.
func TestVisibilitySwitchMidTurn(t *testing.T) {
	h := newHarness(
		Viewer{Identity: "alice", Mode: ModeFull},
		Viewer{Identity: "bob", Mode: ModeSummary},
		Viewer{Identity: "carol", Mode: ModeOff},
	)
	h.feed("Step one is long. It has two sentences.\n\nStep two ")
	// Step two has opened: alice turns reasoning off, carol turns it on.
	h.viewers = []Viewer{{Identity: "alice", Mode: ModeOff}, {Identity: "bob", Mode: ModeSummary}, {Identity: "carol", Mode: ModeFull}}
	h.feed("goes on. More.\n\nStep three.")
	h.chain.End(h.now)

	got := map[string][]string{}
	for _, d := range h.deliveries {
		for _, who := range d.To {
			got[who] = append(got[who], d.Step.Content)
		}
	}
	want := map[string][]string{
		"alice": {"Step one is long. It has two sentences.", "Step two goes on. More."},
		"bob":   {"Step one is long.", "Step two goes on.", "Step three."},
		"carol": {"Step three."},
	}
	for who, w := range want {
		if strings.Join(got[who], "|") != strings.Join(w, "|") {
			t.Errorf("%s received %q, want %q", who, got[who], w)
		}
	}
	for _, d := range h.deliveries {
		if len(d.To) == 0 {
			t.Errorf("a packet without destinations would reach everyone: %+v", d)
		}
	}
}

// Partial updates: the first words at once, then at most one update per
// 150 ms, then the final form; clients without the feature get the final
// form only.
func TestPartialThrottle(t *testing.T) {
	h := newHarness(Viewer{Identity: "fast", Mode: ModeFull, Partial: true}, Viewer{Identity: "plain", Mode: ModeFull})
	d := h.chain.listeners[0].(*Deliverer)
	start := h.now
	for i := range 30 { // a token every 20 ms for 600 ms
		h.now = start.Add(time.Duration(i) * 20 * time.Millisecond)
		h.chain.Reasoning("tok ", "", h.now)
		d.Poll(h.now)
	}
	h.now = h.now.Add(5 * time.Millisecond)
	h.chain.End(h.now)

	var partialTimes []time.Time
	var lastPartialTime time.Time
	finals := 0
	for i, dl := range h.deliveries {
		if dl.Step.Partial {
			if len(dl.To) != 1 || dl.To[0] != "fast" {
				t.Fatalf("partial sent to %v", dl.To)
			}
			// Reconstruct when it was sent from its length: 4 bytes a token.
			sentAt := start.Add(time.Duration(len(dl.Step.Content)/4-1) * 20 * time.Millisecond)
			if i > 0 && sentAt.Sub(lastPartialTime) < PartialInterval {
				t.Fatalf("partials %v apart", sentAt.Sub(lastPartialTime))
			}
			lastPartialTime = sentAt
			partialTimes = append(partialTimes, sentAt)
			continue
		}
		finals++
		if strings.Join(dl.To, ",") != "fast,plain" || dl.Step.Content != strings.Repeat("tok ", 30) {
			t.Fatalf("final %+v", dl)
		}
	}
	if finals != 1 || len(partialTimes) < 3 || !partialTimes[0].Equal(start) {
		t.Fatalf("%d finals, partials at %v", finals, partialTimes)
	}
}
