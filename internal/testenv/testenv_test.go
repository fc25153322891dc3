package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/wire"
)

// Two Go participants join a room on a real livekit-server; one sends an
// Alicia envelope on topic "alicia" and the other decodes it.
func TestLiveKitCarriesAnEnvelope(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	const room = "conv_testenv"

	type received struct {
		env    *wire.Envelope
		topic  string
		sender string
		err    error
	}
	got := make(chan received, 1)
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, params lksdk.DataReceiveParams) {
		p, ok := data.(*lksdk.UserDataPacket)
		if !ok {
			return
		}
		env, err := wire.Unmarshal(p.Payload)
		got <- received{env, p.Topic, params.SenderIdentity, err}
	}
	bot, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{
		APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: room, ParticipantIdentity: "bot",
	}, cb)
	if err != nil {
		t.Fatalf("bot join: %v", err)
	}
	defer bot.Disconnect()
	user, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{
		APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: room, ParticipantIdentity: "user",
	}, lksdk.NewRoomCallback())
	if err != nil {
		t.Fatalf("user join: %v", err)
	}
	defer user.Disconnect()

	// LiveKit delivers data only to participants already in the room.
	testenv.Eventually(t, "the user to see the bot join", func() bool { return user.GetParticipantByIdentity("bot") != nil })

	sent := &wire.Envelope{StanzaID: 1, ConversationID: room, Body: &wire.UserMessage{
		ID: wire.NewID("msg"), ConversationID: room, Content: "Is anyone there?", Timestamp: time.Now().UnixMilli(),
	}}
	payload, err := wire.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	if err := user.LocalParticipant.PublishDataPacket(lksdk.UserData(payload),
		lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishTopic("alicia")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("decode: %v", r.err)
		}
		if r.topic != "alicia" || r.sender != "user" {
			t.Errorf("topic %q from %q, want alicia from user", r.topic, r.sender)
		}
		msg, ok := r.env.Body.(*wire.UserMessage)
		if !ok || *msg != *sent.Body.(*wire.UserMessage) || r.env.StanzaID != 1 {
			t.Fatalf("received %+v, want %+v", r.env.Body, sent.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bot received nothing within 10 s")
	}
}

func TestLiveKitRestart(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	lk.Kill()
	if err := lk.Start(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	r, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{
		APIKey: lk.APIKey, APISecret: lk.APISecret, RoomName: "after-restart", ParticipantIdentity: "p",
	}, lksdk.NewRoomCallback())
	if err != nil {
		t.Fatalf("join after restart: %v", err)
	}
	r.Disconnect()
}

// Each test gets a database of its own.
func TestDatabaseIsolation(t *testing.T) {
	ctx := context.Background()
	a, b := testenv.Database(t), testenv.Database(t)
	if a == b {
		t.Fatal("two tests share a database")
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_here (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'only_here'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("a table of one test's database is visible in another's")
	}
}
