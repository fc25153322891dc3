package room

import (
	"context"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// slowConfigure is the echo conversation with a Configure that waits, as
// one reading a preference from a slow database does, so that packets
// pile up in the session's inbox meanwhile.
type slowConfigure struct {
	Conversation
	entered, release chan struct{}
}

func (c *slowConfigure) Configure(ctx context.Context, identity string, features wire.Features) []string {
	close(c.entered)
	<-c.release
	return c.Conversation.Configure(ctx, identity, features)
}

// A client that floods a busy session gets 504 for what does not fit,
// and every envelope the inbox took is handled, in order; room events
// get in even when it is full.
func TestFullInboxRefusesWith504AndLosesNothingAccepted(t *testing.T) {
	conv := &slowConfigure{entered: make(chan struct{}), release: make(chan struct{})}
	rec := &recorder{}
	s := newSession(context.Background(), SessionConfig{ID: "conv_flood", Store: storage.NewMemory(storage.ReasoningPlain), Open: func(id string) Conversation {
		conv.Conversation = openEcho(id)
		return conv
	}, Metrics: NewMetrics(nil), Logger: testenv.Log(t)}, rec)
	t.Cleanup(s.Close)

	configure(t, s, "u1", 1, 0)
	<-conv.entered // the session is busy with the Configuration
	message := func(stanza int32) []byte {
		b, _ := wire.Marshal(&wire.Envelope{StanzaID: stanza, ConversationID: s.ID,
			Body: &wire.UserMessage{ID: wire.NewID("msg"), ConversationID: s.ID, Content: "hello"}})
		return b
	}
	for i := range int32(inboxMax) {
		s.receive("u1", message(2+i))
	}
	refused := int32(2 + inboxMax)
	s.receive("u1", message(refused))
	s.attributesChanged("u1", map[string]string{}) // an event: taken even now
	if !s.enqueue(rawPacket{from: "u2", event: eventLeft}) {
		t.Fatal("a room event was refused by a full inbox")
	}
	close(conv.release)

	envs := waitFor(t, rec, func(envs []*wire.Envelope) bool {
		acks := 0
		for _, e := range envs {
			if _, ok := e.Body.(*wire.Acknowledgement); ok {
				acks++
			}
		}
		return acks == inboxMax
	})
	var got504 bool
	next := int32(2)
	for _, e := range envs {
		switch b := e.Body.(type) {
		case *wire.ErrorMessage:
			if b.Code == wire.CodeQueueFull {
				got504 = true
			}
		case *wire.Acknowledgement:
			if b.AcknowledgedStanzaID != next {
				t.Fatalf("acknowledged %d, want %d: envelopes handled out of order", b.AcknowledgedStanzaID, next)
			}
			next++
		}
	}
	if !got504 {
		t.Fatalf("no 504 for the envelope past the inbox's %d", inboxMax)
	}
	if next != refused {
		t.Fatalf("acknowledged up to %d, want every one before %d", next-1, refused)
	}
}
