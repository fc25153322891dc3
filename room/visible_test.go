package room

import (
	"sync/atomic"
	"testing"
	"time"

	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// A client sees the bot as a participant as soon as it has joined: before
// its first question is answered. livekit-server announces a participant
// that publishes no track only in its room's batched updates (every 3 s),
// so a data-only bot would greet a client that cannot see it yet.
func TestBotIsVisibleAsSoonAsItJoins(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	const roomName = "conv_visible"
	token, err := UserToken(e.cfg, roomName, "user", "user", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, identity: "user", raw: map[int32][]byte{}, notify: make(chan struct{}, 1)}
	var visible atomic.Int64 // nanoseconds since the join, when the bot was announced
	start := time.Now()
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
		if u, ok := data.(*lksdk.UserDataPacket); ok && u.Topic == Topic {
			c.add(u.Payload)
		}
	}
	cb.OnParticipantConnected = func(p *lksdk.RemoteParticipant) {
		if p.Identity() == BotIdentity {
			visible.CompareAndSwap(0, int64(time.Since(start)))
		}
	}
	c.room, err = lksdk.ConnectToRoomWithToken(lk.URL, token, cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.room.Disconnect)
	_ = c.room.RegisterByteStreamHandler(Topic, func(r *lksdk.ByteStreamReader, _ string) { c.add(r.ReadAll()) })
	c.awaitGreeting(e, roomName)
	greetedAt := time.Since(start)
	c.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
	q := c.send(&wire.UserMessage{ID: "m1", ConversationID: roomName, Content: "hello"})
	c.wait("the answer", func(g []*wire.Envelope) bool {
		for _, e := range g {
			if a, ok := e.Body.(*wire.Acknowledgement); ok && a.AcknowledgedStanzaID == q {
				return true
			}
		}
		return false
	})
	answered := time.Since(start)
	v := time.Duration(visible.Load())
	t.Logf("after the user's join: greeting %v, first answer %v, bot visible %v", greetedAt.Round(time.Millisecond), answered.Round(time.Millisecond), v.Round(time.Millisecond))
	if v == 0 {
		t.Fatalf("the first question was answered at %v and the client still does not see the bot", answered.Round(time.Millisecond))
	}
}
