package room

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// Two processes under one agent name share 20 rooms through LiveKit's
// dispatch. When one stops, it flushes its log, asks LiveKit to dispatch
// its rooms again, and the other process takes each over, continuing the
// stanza count where the stopped one left it.
func TestTwoProcessesShareRooms(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	url := testenv.Database(t)
	openStore := func() storage.Store {
		s, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := startAgent(t, lk, openStore()), startAgent(t, lk, openStore())
	clients := map[string]*client{}
	for i := range 20 {
		room := fmt.Sprintf("conv_share_%02d", i)
		c := joinAs(t, a, room, "user")
		c.wait("greeting", func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 })
		c.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
		c.send(&wire.UserMessage{ID: "m", ConversationID: room, Content: "hello"})
		c.wait("answers", func(g []*wire.Envelope) bool {
			return count[*wire.Acknowledgement](g) > 0 && count[*wire.Configuration](g) > 1
		})
		clients[room] = c
	}
	onA, onB := len(a.agent.sessions()), len(b.agent.sessions())
	t.Logf("rooms: %d on process A, %d on process B", onA, onB)
	if onA+onB != 20 || onA == 0 || onB == 0 {
		t.Fatalf("rooms are not shared: %d and %d", onA, onB)
	}
	moved := map[string]int32{} // room → last stanza before the handover
	for _, s := range a.agent.sessions() {
		c := clients[s.ID]
		c.mu.Lock()
		moved[s.ID] = -c.got[len(c.got)-1].StanzaID
		c.mu.Unlock()
	}
	start := time.Now()
	a.shutdown()
	for room, last := range moved {
		c := clients[room]
		c.wait("the new bot's greeting", func(g []*wire.Envelope) bool {
			for _, e := range g {
				if _, ok := e.Body.(*wire.Configuration); ok && -e.StanzaID > last {
					return true
				}
			}
			return false
		})
	}
	t.Logf("%d rooms taken over by process B in %v", len(moved), time.Since(start))
	if n := len(b.agent.sessions()); n != 20 {
		t.Fatalf("process B holds %d rooms, want 20", n)
	}
}

// POST /v1/token mints a token whose room configuration brings the bot; it
// needs the secret; for a room that exists without a bot, it dispatches
// one.
func TestTokenEndpoint(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	srv := httptest.NewServer(e.agent.TokenHandler())
	defer srv.Close()
	post := func(secret string, body any) (int, tokenResponse) { return askTokenFor(t, srv.URL, secret, body) }
	if code, _ := post("", map[string]string{"identity": "alice"}); code != http.StatusUnauthorized {
		t.Fatalf("no secret: %d", code)
	}
	if code, _ := post("wrong", map[string]string{"identity": "alice"}); code != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", code)
	}
	if code, _ := post(lk.APISecret, map[string]string{"room": "a b"}); code != http.StatusBadRequest {
		t.Fatalf("bad input: %d", code)
	}
	code, tr := post(lk.APISecret, map[string]string{"identity": "alice"})
	if code != 200 || tr.Token == "" || tr.Room == "" {
		t.Fatalf("token: %d %+v", code, tr)
	}
	if id, err := VerifyToken(lk.APIKey, lk.APISecret, tr.Token); err != nil || id != "alice" {
		t.Fatalf("minted token names %q (%v)", id, err)
	}
	c := joinWithToken(t, lk, tr.Token)
	c.wait("the bot", func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 })

	// A room whose bot is gone (joined with a token that dispatches
	// nothing): asking for a token brings a bot back.
	plain, _ := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("bob").SetValidFor(time.Minute).
		SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: "conv_orphan"}).ToJWT()
	orphan := joinWithToken(t, lk, plain)
	if waitForBot(orphan, time.Second) {
		t.Fatal("a bot came without dispatch")
	}
	if code, _ := post(lk.APISecret, map[string]string{"identity": "bob", "room": "conv_orphan"}); code != 200 {
		t.Fatalf("token for an orphan room: %d", code)
	}
	orphan.wait("a bot for the orphan room", func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 })
}

func joinWithToken(t *testing.T, lk *testenv.LiveKit, token string) *client {
	t.Helper()
	c := &client{t: t, identity: "user", raw: map[int32][]byte{}, notify: make(chan struct{}, 1)}
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
		if u, ok := data.(*lksdk.UserDataPacket); ok && u.Topic == Topic {
			c.add(u.Payload)
		}
	}
	r, err := lksdk.ConnectToRoomWithToken(lk.URL, token, cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatal(err)
	}
	c.room = r
	t.Cleanup(r.Disconnect)
	return c
}

// No goroutine of Alicia's outlives its sessions and agent.
func TestNoGoroutineLeaks(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	before := goleak.IgnoreCurrent()
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	for i := range 3 {
		c := greeted(t, e, fmt.Sprintf("conv_leak_%d", i), "alice")
		c.send(&wire.UserMessage{ID: "m", ConversationID: c.room.Name(), Content: "burst 5"})
		c.wait("a sentence", func(g []*wire.Envelope) bool { return count[*wire.AssistantSentence](g) > 0 })
		c.room.Disconnect()
	}
	e.shutdown()
	// The SDK's own connection teardown finishes shortly after Disconnect.
	var err error
	for range 50 {
		// Idle keep-alive connections belong to the HTTP clients' pools.
		if err = goleak.Find(before, goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop")); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal(err)
}
