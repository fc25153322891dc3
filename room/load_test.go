package room

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// logLines keeps what an agent logs, for tests that read its warnings.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logLines) containing(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// A process configured for N conversations gets N rooms: LiveKit stops
// dispatching to a worker at its target load (0.7), so a load of
// sessions/N would leave the last 30 % of the capacity unused. Once full,
// the log says so.
func TestConfiguredMaximumIsReachable(t *testing.T) {
	const max = 4
	lk := testenv.StartLiveKit(t)
	var logged logLines
	e := startAgentWith(t, lk, storage.NewMemory(storage.ReasoningPlain), func(c *Config) { c.MaxSessions = max },
		slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo})))
	for i := range max {
		room := fmt.Sprintf("conv_load_%d", i)
		c := joinAs(t, e, room, "user")
		c.wait(fmt.Sprintf("the bot in room %d of %d", i+1, max), func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 })
	}
	if n := len(e.agent.sessions()); n != max {
		t.Fatalf("%d sessions, want %d", n, max)
	}
	if logged.containing("worker full") == 0 {
		t.Fatalf("the agent took its maximum and did not say it is full:\n%s", strings.Join(logged.lines, ""))
	}
	load, jobs, full := e.agent.load()
	t.Logf("reported at the maximum: load %.2f, %d jobs, full %v", load, jobs, full)
}

// A room deleted through RoomService stays deleted: the bot leaves and
// asks for no new dispatch, which would create the room again.
func TestDeletedRoomStaysDeleted(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	const room = "conv_deleted"
	greeted(t, e, room, "user")
	sessions := e.agent.sessions()
	if len(sessions) != 1 {
		t.Fatalf("%d sessions", len(sessions))
	}
	bot := sessions[0]
	rooms := lksdk.NewRoomServiceClient(lk.URL, lk.APIKey, lk.APISecret)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rooms.DeleteRoom(ctx, &livekit.DeleteRoomRequest{Room: room}); err != nil {
		t.Fatal(err)
	}
	// The bot's job has ended (and with it any dispatch it asked for).
	for slices.Contains(e.agent.sessions(), bot) {
		select {
		case <-ctx.Done():
			t.Fatal("the bot's session outlived its deleted room")
		case <-time.After(20 * time.Millisecond):
		}
	}
	list, err := rooms.ListRooms(ctx, &livekit.ListRoomsRequest{Names: []string{room}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Rooms) != 0 {
		t.Fatalf("the deleted room is back: %v", list.Rooms)
	}
	dispatches, err := lksdk.NewAgentDispatchServiceClient(lk.URL, lk.APIKey, lk.APISecret).ListDispatch(ctx, &livekit.ListAgentDispatchRequest{Room: room})
	if err == nil && len(dispatches.AgentDispatches) != 0 {
		t.Fatalf("a dispatch to the deleted room: %v", dispatches.AgentDispatches)
	}
}

// LiveKit offers a dispatch once, when it is made. A full process leaves
// a new room to the dispatch, which no worker takes then; once a
// conversation ends and frees a place, the dispatch is made again and the
// room's user is greeted.
func TestDroppedDispatchIsMadeAgain(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgentWith(t, lk, storage.NewMemory(storage.ReasoningPlain), func(c *Config) {
		c.MaxSessions = 1
		c.EmptyTimeout = time.Second
	}, testenv.Log(t))
	srv := httptest.NewServer(e.agent.TokenHandler())
	defer srv.Close()
	greeting := func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 }

	alice := joinWithToken(t, lk, postToken(t, srv.URL, lk.APISecret, map[string]string{"identity": "alice"}).Token)
	alice.wait("the greeting of the conversation that fills the process", greeting)
	second := postToken(t, srv.URL, lk.APISecret, map[string]string{"identity": "bob"})
	bob := joinWithToken(t, lk, second.Token)
	// The place frees once Alice has left and her bot has waited
	// EmptyTimeout for her, some 4 s; the dispatch is made again at the
	// next look after that, at 8 or 18 s.
	alice.room.Disconnect()
	if got, ok := bob.within(30*time.Second, greeting); !ok {
		t.Fatalf("no greeting in 30 s once a place was free; got %s", describe(got))
	}
	bob.send(&wire.Configuration{Features: []string{wire.FeatureStreaming}})
	bob.send(&wire.UserMessage{ID: "m1", ConversationID: second.Room, Content: "burst 1"})
	bob.wait("the answer", func(g []*wire.Envelope) bool { return count[*wire.AssistantSentence](g) > 0 })

	if n := counterValue(t, e.agent.metrics.jobs.WithLabelValues("dispatched_again")); n < 1 {
		t.Fatalf("%v dispatches made again; the bot came through the first", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := e.agent.dispatch.ListDispatch(ctx, &livekit.ListAgentDispatchRequest{Room: second.Room})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.AgentDispatches) != 1 {
		t.Fatalf("%d dispatches listed in the room, want the one that brought its bot: %v", len(ds.AgentDispatches), ds.AgentDispatches)
	}
}

// A user whose token asks LiveKit for the agent (minted elsewhere: a
// stock starter's token server), and who comes while no worker is
// registered under its name, is greeted once one registers: LiveKit
// dropped that dispatch, does not offer it again, and no process asked
// for it.
func TestDispatchDroppedBeforeAnyWorkerIsAdopted(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	cfg := Config{LiveKitURL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, AgentName: "alicia-test"}
	token, err := UserToken(cfg, "conv_before_any_worker", "alice", "alice", map[string]string{AttrFeatures: wire.FeatureStreaming})
	if err != nil {
		t.Fatal(err)
	}
	// Her join returns once her connection is up, long after LiveKit
	// offered the room's dispatch, at its creation, to no worker.
	alice := joinWithToken(t, lk, token)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	if got, ok := alice.within(30*time.Second, func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 }); !ok {
		t.Fatalf("no greeting in 30 s after the worker registered; got %s", describe(got))
	}
	if n := counterValue(t, e.agent.metrics.jobs.WithLabelValues("dispatched_again")); n < 1 {
		t.Fatalf("%v dispatches made again; the bot came through the first", n)
	}
}

// A room has one follower of its dispatch, however often it is dispatched
// to: two would each make a lost dispatch again. The second dispatch
// starts the follower's looks over, and a stopping process's followers
// end.
func TestOneFollowerARoom(t *testing.T) {
	a := NewAgent(Config{AgentName: "alicia"}, storage.NewMemory(storage.ReasoningPlain), NewMetrics(nil), nil, testenv.Log(t))
	ctx, cancel := context.WithCancel(t.Context())
	a.ctx = ctx
	a.followDispatch("room-a")
	a.followDispatch("room-a")
	a.followDispatch("room-b")
	a.mu.Lock()
	n, again := len(a.following), a.following["room-a"]
	a.mu.Unlock()
	cancel()
	a.wg.Wait()
	if n != 2 || !again {
		t.Fatalf("%d rooms followed, room-a asked again: %v; want 2, true", n, again)
	}
	if len(a.following) != 0 {
		t.Fatalf("%d followers left after the process stopped", len(a.following))
	}
}
