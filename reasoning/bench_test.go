package reasoning_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/wire"
	"github.com/alicia-voice/alicia/wire/agui"
)

// A Qwen3-sized thinking phase: about 330 tokens in four paragraphs,
// streamed a token at a time, 11 ms apart.
var benchTokens = regexp.MustCompile(`\n+|[ \t]*[\p{L}\p{N}']{1,6}|[ \t]*[^\s\p{L}\p{N}']|\s`).FindAllString(
	"\n"+strings.Join([]string{
		strings.Repeat("The user asks for tomorrow's weather in Lyon, so I need a forecast. ", 5),
		strings.Repeat("The forecast tool takes a city and a number of days; one day is enough. ", 5),
		strings.Repeat("They write in English but live in France, so Celsius is the right unit. ", 5),
		strings.Repeat("I will call the tool, then answer in two short sentences. ", 5),
	}, "\n\n")+"\n", -1)

// BenchmarkDelta measures the cost of one reasoning delta from its
// arrival to the encoded packets leaving, per delta, with every face
// attached: ReasoningStep packets for three viewers (full with partial
// updates, summary, off), AG-UI events, and storage hand-off.
// "final-only" has a full viewer without partial updates: the floor.
func BenchmarkDelta(b *testing.B) {
	for _, c := range []struct {
		name    string
		viewers []reasoning.Viewer
	}{
		{"all-faces", []reasoning.Viewer{{Identity: "a", Mode: reasoning.ModeFull, Partial: true},
			{Identity: "b", Mode: reasoning.ModeSummary}, {Identity: "c", Mode: reasoning.ModeOff}}},
		{"final-only", []reasoning.Viewer{{Identity: "a", Mode: reasoning.ModeFull}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 2048)
			var packets, events int
			stanza := int32(0)
			b.ReportAllocs()
			for b.Loop() {
				packets, events = 0, 0
				deliver := reasoning.NewDeliverer(func() []reasoning.Viewer { return c.viewers }, func(d reasoning.Delivery) {
					stanza--
					var err error
					if buf, err = wire.AppendMarshal(buf[:0], &wire.Envelope{StanzaID: stanza, ConversationID: "conv_Yt2xQ9mB7LkP0aZr4sWc1", Body: d.Step}); err != nil {
						b.Fatal(err)
					}
					packets++
				})
				ag := reasoning.NewAGUIEvents(reasoning.ModeFull, func(agui.Event) { events++ })
				chain := reasoning.NewChain("conv_Yt2xQ9mB7LkP0aZr4sWc1", "msg_p9LzT4qW2eR8yU1iO0aS3", "am_Q1wE2rT3yU4iO5pA6sD7f",
					deliver, ag, reasoning.OnSealed(func(reasoning.Step) {}))
				now := time.Unix(1_800_000_000, 0)
				for _, tok := range benchTokens {
					now = now.Add(11 * time.Millisecond)
					chain.Reasoning(tok, "", now)
					deliver.Poll(now)
				}
				chain.End(now)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(benchTokens)), "ns/delta")
			b.ReportMetric(float64(len(benchTokens)), "deltas/turn")
			b.ReportMetric(float64(packets), "packets/turn")
			b.ReportMetric(float64(events), "agui-events/turn")
		})
	}
}
