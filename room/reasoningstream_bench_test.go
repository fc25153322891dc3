package room

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// BenchmarkReasoningStreamBytes: what one reasoning step costs a client on
// the wire, as LiveKit data packets from the bot, in each form. The
// reasoning is the stand-in's default (three steps), at the realistic
// pace of 11 ms a token in 4-byte tokens, so that partial updates come as
// often as PartialInterval lets them.
func BenchmarkReasoningStreamBytes(b *testing.B) {
	viewers := []reasoning.Viewer{
		{Identity: "packets-final", Mode: reasoning.ModeFull},
		{Identity: "packets-partial", Mode: reasoning.ModeFull, Partial: true},
		{Identity: "packets-summary", Mode: reasoning.ModeSummary},
		{Identity: "stream-full", Mode: reasoning.ModeFull, Streams: true},
		{Identity: "stream-summary", Mode: reasoning.ModeSummary, Streams: true},
	}
	text := strings.Join(standin.DefaultScenario().Rounds[0].Reasoning, "\n\n")
	text = strings.ReplaceAll(text, "{{question}}", "What is a lighthouse for?")
	var perStep map[string]float64
	for b.Loop() {
		rec := &streamRecorder{recorder: &recorder{}}
		s := newSession(context.Background(), SessionConfig{ID: "conv_bytes", Store: storage.NewMemory(storage.ReasoningPlain),
			Open: openEcho, Metrics: NewMetrics(nil), Logger: testenv.Log(b)}, rec)
		// Envelopes as the session frames them (its writer sends only to
		// members in sync, which this benchmark has none of).
		stanza := int32(0)
		d := reasoning.NewDeliverer(func() []reasoning.Viewer { return viewers }, func(d reasoning.Delivery) {
			stanza--
			payload, err := wire.Marshal(&wire.Envelope{StanzaID: stanza, ConversationID: s.ID, Body: d.Step})
			if err != nil {
				b.Fatal(err)
			}
			rec.sent = append(rec.sent, struct {
				payload []byte
				to      []string
			}{payload, d.To})
		})
		d.StreamTo(s.StreamStep)
		c := reasoning.NewChain(s.ID, "msg_Q1wE2rT3yU4iO5pA6sD7f", "am_Z9xC8vB7nM6lK5jH4gF3d", d)
		now := time.Unix(1_800_000_000, 0)
		for i := 0; i < len(text); i += 4 {
			now = now.Add(11 * time.Millisecond)
			c.Reasoning(text[i:min(i+4, len(text))], "", now)
			d.Poll(now)
		}
		c.End(now)
		steps := len(c.Steps())
		s.Close()
		perStep = wireBytes(rec, steps)
	}
	for who, n := range perStep {
		b.ReportMetric(n, "B/step-"+who)
	}
}

// streamRecorder keeps whom each stream packet went to.
type streamRecorder struct {
	*recorder
	to [][]string
}

func (r *streamRecorder) publishPacket(p *livekit.DataPacket, to []string) error {
	r.mu.Lock()
	r.to = append(r.to, to)
	r.mu.Unlock()
	return r.recorder.publishPacket(p, to)
}

// wireBytes is the bytes each recipient got per step: envelopes as the
// data packets that carry them, stream packets as they are, each with
// its destinations.
func wireBytes(rec *streamRecorder, steps int) map[string]float64 {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := map[string]float64{}
	for _, e := range rec.sent {
		p := &livekit.DataPacket{DestinationIdentities: e.to, Value: &livekit.DataPacket_User{User: &livekit.UserPacket{Payload: e.payload, Topic: &[]string{Topic}[0]}}}
		for _, to := range e.to {
			out[to] += float64(proto.Size(p)) / float64(steps)
		}
	}
	for i, p := range rec.packets {
		p = proto.CloneOf(p)
		p.DestinationIdentities = rec.to[i]
		for _, to := range rec.to[i] {
			out[to] += float64(proto.Size(p)) / float64(steps)
		}
	}
	return out
}
