package reasoning_test

import (
	"sync"
	"testing"
	"time"

	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/wire"
)

// Over a real livekit-server, each participant receives reasoning in the
// form it chose, through destination identities, and a participant whose
// preference is off receives no ReasoningStep packet at all.
func TestDeliveryOverLiveKit(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	const room = "conv_reasoning"
	type inbox struct {
		mu  sync.Mutex
		got []*wire.Envelope
		all int
		// barrier is set by the packet the bot sends last: the bot's
		// reliable packets arrive in order, so every step has come before.
		barrier bool
	}
	join := func(identity string, box *inbox) *lksdk.Room {
		cb := lksdk.NewRoomCallback()
		if box != nil {
			cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
				p, ok := data.(*lksdk.UserDataPacket)
				if !ok {
					return
				}
				box.mu.Lock()
				defer box.mu.Unlock()
				if p.Topic == "barrier" {
					box.barrier = true
					return
				}
				box.all++
				if env, err := wire.Unmarshal(p.Payload); err == nil {
					box.got = append(box.got, env)
				}
			}
		}
		r, err := lksdk.ConnectToRoom(lk.URL, lksdk.ConnectInfo{APIKey: lk.APIKey, APISecret: lk.APISecret,
			RoomName: room, ParticipantIdentity: identity}, cb)
		if err != nil {
			t.Fatalf("%s join: %v", identity, err)
		}
		t.Cleanup(r.Disconnect)
		return r
	}
	boxes := map[string]*inbox{"alice": {}, "bob": {}, "carol": {}}
	for who, box := range boxes {
		join(who, box)
	}
	bot := join("bot", nil)
	testenv.Eventually(t, "every participant to join", func() bool { return len(bot.GetRemoteParticipants()) >= 3 })

	viewers := []reasoning.Viewer{
		{Identity: "alice", Mode: reasoning.ModeFull, Partial: true},
		{Identity: "bob", Mode: reasoning.ModeSummary},
		{Identity: "carol", Mode: reasoning.ModeOff},
	}
	stanza := int32(0)
	var sent int
	deliver := reasoning.NewDeliverer(func() []reasoning.Viewer { return viewers }, func(d reasoning.Delivery) {
		stanza--
		b, err := wire.Marshal(&wire.Envelope{StanzaID: stanza, ConversationID: room, Body: d.Step})
		if err != nil {
			t.Fatal(err)
		}
		if err := bot.LocalParticipant.PublishDataPacket(lksdk.UserData(b), lksdk.WithDataPublishReliable(true),
			lksdk.WithDataPublishTopic("alicia"), lksdk.WithDataPublishDestination(d.To)); err != nil {
			t.Fatal(err)
		}
		sent++
	})
	chain := reasoning.NewChain(room, "msg_u", "msg_a", deliver)
	now := time.Now()
	for _, tok := range []string{"The user", " wants Lyon's", " weather. I will", " call the tool.\n\n", "Then answer", " in Celsius.", "\n"} {
		now = now.Add(200 * time.Millisecond) // each delta after the throttle interval
		chain.Reasoning(tok, "", now)
	}
	chain.End(now)
	// Carol switches reasoning on: a packet for her only, so that the
	// test knows the channel to her works and the absence above is real.
	viewers[2].Mode = reasoning.ModeFull
	chain.Reasoning("A last thought.", "", now)
	chain.End(now)

	want := map[string][]string{
		"alice": {"The user", "The user wants Lyon's", "The user wants Lyon's weather. I will", "The user wants Lyon's weather. I will call the tool.",
			"The user wants Lyon's weather. I will call the tool.", "Then answer", "Then answer in Celsius.", "Then answer in Celsius.", "A last thought.", "A last thought."},
		"bob":   {"The user wants Lyon's weather.", "Then answer in Celsius.", "A last thought."},
		"carol": {"A last thought."},
	}
	if err := bot.LocalParticipant.PublishDataPacket(lksdk.UserData([]byte("end")), lksdk.WithDataPublishReliable(true),
		lksdk.WithDataPublishTopic("barrier")); err != nil {
		t.Fatal(err)
	}
	for who, box := range boxes {
		testenv.Eventually(t, who+"'s last packet", func() bool { box.mu.Lock(); defer box.mu.Unlock(); return box.barrier })
	}
	for who, w := range want {
		box := boxes[who]
		box.mu.Lock()
		var got []string
		for _, env := range box.got {
			rs, ok := env.Body.(*wire.ReasoningStep)
			if !ok {
				t.Errorf("%s received a %s", who, env.Type())
				continue
			}
			got = append(got, rs.Content)
			if rs.PreviousID != "msg_u" || rs.StepIndex < 1 {
				t.Errorf("%s: step %+v", who, rs)
			}
		}
		if box.all != len(box.got) {
			t.Errorf("%s received %d packets, %d of them envelopes", who, box.all, len(box.got))
		}
		box.mu.Unlock()
		if len(got) != len(w) {
			t.Errorf("%s received %q\nwant %q", who, got, w)
			continue
		}
		for i := range w {
			if got[i] != w[i] {
				t.Errorf("%s packet %d: %q, want %q", who, i, got[i], w[i])
			}
		}
	}
	t.Logf("%d packets published", sent)
}
