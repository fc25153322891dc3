package room

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// received is a packet on the alicia topic and who LiveKit says sent it
// ("" for its server API).
type received struct {
	payload string
	sender  string
}

// listener is a user's participant that records what it receives on the
// alicia topic, in order.
type listener struct {
	mu     sync.Mutex
	got    []received
	notify chan struct{}
	// probed is closed at the first packet on probeTopic.
	probed    chan struct{}
	probeOnce sync.Once
}

// probeTopic is the topic of packets that show a participant's data
// channel open.
const probeTopic = "probe"

func listen(t *testing.T, lk *testenv.LiveKit, room, identity string) *listener {
	t.Helper()
	l := &listener{notify: make(chan struct{}, 1), probed: make(chan struct{})}
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, p lksdk.DataReceiveParams) {
		if u, ok := data.(*lksdk.UserDataPacket); ok && u.Topic == probeTopic {
			l.probeOnce.Do(func() { close(l.probed) })
		}
		if u, ok := data.(*lksdk.UserDataPacket); ok && u.Topic == Topic {
			l.mu.Lock()
			l.got = append(l.got, received{payload: string(u.Payload), sender: p.SenderIdentity})
			l.mu.Unlock()
			select {
			case l.notify <- struct{}{}:
			default:
			}
		}
	}
	token, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity(identity).SetValidFor(time.Minute).
		SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: room}).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	r, err := lksdk.ConnectToRoomWithToken(lk.URL, token, cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Disconnect)
	return l
}

// waitFor returns the first n packets once they are there.
func (l *listener) waitFor(t *testing.T, n int) []received {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		l.mu.Lock()
		got := append([]received(nil), l.got...)
		l.mu.Unlock()
		if len(got) >= n {
			return got[:n]
		}
		select {
		case <-l.notify:
		case <-deadline:
			t.Fatalf("got %d packets of %d: %v", len(got), n, got)
		}
	}
}

// Until the bot's own data channel is open its greetings go through
// LiveKit's server API, which reaches a user once LiveKit has it active;
// everything else, and greetings once the channel is open, go over the
// channel. An API that fails leaves the greeting to the channel.
func TestFirstGreetingGoesThroughTheServer(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	const roomName = "conv_via_server"
	bot := lksdk.NewRoom(lksdk.NewRoomCallback())
	token, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("bot").SetValidFor(time.Minute).
		SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: roomName, Agent: true}).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	if err := bot.JoinWithToken(lk.URL, token, lksdk.WithAutoSubscribe(false)); err != nil {
		t.Fatal(err)
	}
	defer bot.Disconnect()
	user := listen(t, lk, roomName, "user")
	cfg := Config{LiveKitURL: lk.URL}
	rooms := lksdk.NewRoomServiceClient(cfg.httpURL(), lk.APIKey, lk.APISecret)
	user.waitReachable(t, rooms, roomName)

	topic := Topic
	var failing bool
	sent := prometheus.NewCounter(prometheus.CounterOpts{Name: "sent"})
	c := &conn{room: bot, sentViaServer: sent, viaServer: func(ctx context.Context, payload []byte, to []string) error {
		if failing {
			return fmt.Errorf("the API is down")
		}
		_, err := rooms.SendData(ctx, &livekit.SendDataRequest{Room: roomName, Data: payload, Kind: livekit.DataPacket_RELIABLE,
			DestinationIdentities: to, Topic: &topic})
		return err
	}}
	// Nothing has opened the bot's data channel yet.
	again, err := c.greet([]byte("greeting"), []string{"user"})
	if err != nil {
		t.Fatal(err)
	}
	if again == nil {
		t.Fatal("a greeting sent through the API, which may drop it, does not say when to repeat it")
	}
	select {
	case <-again:
		t.Fatal("a greeting sent through the API is to be repeated before the bot's channel is open")
	default:
	}
	if got := user.waitFor(t, 1); got[0] != (received{"greeting", ""}) {
		t.Fatalf("the first greeting came as %+v, want it from LiveKit's server", got[0])
	}
	if err := c.publish([]byte("answer"), []string{"user"}); err != nil {
		t.Fatal(err)
	}
	if got := user.waitFor(t, 2); got[1] != (received{"answer", "bot"}) {
		t.Fatalf("an envelope that is no greeting came as %+v, want it from the bot", got[1])
	}
	failing = true
	if again, err := c.greet([]byte("api down"), []string{"user"}); err != nil || again != nil {
		t.Fatalf("a greeting the API refused: %v, repeat %v; want it sent over the channel, never to repeat", err, again)
	}
	failing = false
	c.openDataChannel(bot)
	select {
	case <-again:
	default:
		t.Fatal("the bot's channel is open, and the greeting sent through the API is not to be repeated yet")
	}
	if again, err := c.greet([]byte("greeting again"), []string{"user"}); err != nil || again != nil {
		t.Fatalf("a greeting once the channel is open: %v, repeat %v; want it sent over the channel, never to repeat", err, again)
	}
	got := user.waitFor(t, 4)
	if want := []received{{"api down", "bot"}, {"greeting again", "bot"}}; got[2] != want[0] || got[3] != want[1] {
		t.Fatalf("got %+v, want %+v after the first two", got, want)
	}
	if n := counterValue(t, sent); n != 1 {
		t.Fatalf("%v envelopes counted as sent through the server, want 1", n)
	}
}

// waitReachable waits until packets sent through LiveKit's API reach the
// listener: LiveKit counts a participant active once its connection is
// up, and drops what its API is asked to send there until the data
// channel on it is open too (a user's own packets to it are held and
// sent then, the API's are not).
func (l *listener) waitReachable(t *testing.T, rooms *lksdk.RoomServiceClient, room string) {
	t.Helper()
	topic := probeTopic
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := rooms.SendData(ctx, &livekit.SendDataRequest{Room: room, Data: []byte{0}, Kind: livekit.DataPacket_RELIABLE, Topic: &topic})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.probed:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing sent through LiveKit's API reached the user in 15 s")
		}
	}
}

// A new conversation's room is opened when its token is minted, so the
// bot waits in it for its user; LiveKit would announce that user, who
// publishes nothing, to the bot only in its next batched update, seconds
// later, and the bot finds the user by asking. The process that opens the
// room joins it itself, with no dispatch; with DispatchOnly, LiveKit
// dispatches the agent to it.
func TestRoomOpensWithItsToken(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	for _, dispatchOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("dispatch-only=%v", dispatchOnly), func(t *testing.T) {
			e := startAgentWith(t, lk, storage.NewMemory(storage.ReasoningPlain), func(c *Config) { c.DispatchOnly = dispatchOnly }, testenv.Log(t))
			srv := httptest.NewServer(e.agent.TokenHandler())
			defer srv.Close()
			tr := postToken(t, srv.URL, lk.APISecret, map[string]string{"identity": "alice"})

			// The bot is there before its user joins.
			rooms := lksdk.NewRoomServiceClient(e.cfg.httpURL(), lk.APIKey, lk.APISecret)
			testenv.Eventually(t, "the bot in the room its token was minted for", func() bool { return botListed(t, rooms, tr.Room) })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ds, err := e.agent.dispatch.ListDispatch(ctx, &livekit.ListAgentDispatchRequest{Room: tr.Room})
			if err != nil {
				t.Fatal(err)
			}
			ours := 0
			for _, d := range ds.AgentDispatches {
				if d.AgentName == e.cfg.AgentName {
					ours++
				}
			}
			if want := map[bool]int{false: 0, true: 1}[dispatchOnly]; ours != want {
				t.Fatalf("%d dispatches of the agent in the room, want %d: %v", ours, want, ds.AgentDispatches)
			}

			c := joinWithToken(t, lk, tr.Token)
			c.wait("the greeting", func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 })
			if n := counterValue(t, e.agent.metrics.usersListed); n != 1 {
				t.Fatalf("the bot found %v users by asking LiveKit, want 1 (it greeted only once LiveKit announced the user)", n)
			}
			c.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
			c.send(&wire.UserMessage{ID: "m1", ConversationID: tr.Room, Content: "burst 2"})
			c.wait("the answer", func(g []*wire.Envelope) bool { return count[*wire.AssistantSentence](g) == 2 })
			if bot := c.room.GetParticipantByIdentity(BotIdentity); bot == nil || bot.Kind() != lksdk.ParticipantAgent ||
				bot.Attributes()[lkAgentNameAttr] != e.cfg.AgentName {
				t.Fatalf("the bot is not seen as the deployment's agent: %+v", bot)
			}
		})
	}
}

// askTokenFor posts body to the token endpoint at url with secret (none if
// empty) as the bearer.
func askTokenFor(t *testing.T, url, secret string, body any) (int, tokenResponse) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr tokenResponse
	_ = json.NewDecoder(resp.Body).Decode(&tr)
	return resp.StatusCode, tr
}

// postToken is a token the endpoint mints for body.
func postToken(t *testing.T, url, secret string, body any) tokenResponse {
	t.Helper()
	code, tr := askTokenFor(t, url, secret, body)
	if code != http.StatusOK {
		t.Fatalf("token: HTTP %d", code)
	}
	return tr
}

func botListed(t *testing.T, rooms *lksdk.RoomServiceClient, room string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
	if err != nil {
		return false // not created yet
	}
	bot, _ := parties(res.Participants, "")
	return bot
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
