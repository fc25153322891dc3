package room

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// recorder stands in for the room connection in session unit tests: it
// keeps what would have been published, to whom.
type recorder struct {
	mu   sync.Mutex
	sent []struct {
		payload []byte
		to      []string
	}
	packets []*livekit.DataPacket
	attrs   []map[string]string
	// order names what was published, in order: envelope, packet or
	// attributes.
	order []string
	// down fails every publish, as a room that is reconnecting does.
	down bool
	// again, if set, is what greet returns: the greeting went a way that
	// may drop it.
	again chan struct{}
	// overChannel is the index in sent of the first greeting sent once
	// again was closed (over the bot's channel), or -1.
	overChannel int
	// conns names connections other than "PA_" + identity.
	conns map[string]string
}

func (r *recorder) publish(p []byte, to []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return errNotConnected
	}
	r.sent = append(r.sent, struct {
		payload []byte
		to      []string
	}{p, to})
	r.order = append(r.order, "envelope")
	return nil
}
func (r *recorder) publishStream(p []byte, to []string) error { return r.publish(p, to) }
func (r *recorder) greet(p []byte, to []string) (<-chan struct{}, error) {
	if r.again != nil {
		select {
		case <-r.again:
			r.mu.Lock()
			if r.overChannel < 0 {
				r.overChannel = len(r.sent)
			}
			r.mu.Unlock()
		default:
			return r.again, r.publish(p, to)
		}
	}
	return nil, r.publish(p, to)
}
func (r *recorder) connection(identity string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.conns[identity]; ok {
		return c
	}
	return "PA_" + identity
}

// reconnect moves identity to another connection, with no event, as the
// SDK does when LiveKit's update names a user's new connection.
func (r *recorder) reconnect(identity, conn string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		r.conns = map[string]string{}
	}
	r.conns[identity] = conn
}
func (r *recorder) attributes(context.Context, string) (map[string]string, error) {
	return nil, nil
}

// publishPacket and setAttributes keep the stream packets and attribute
// changes in the same order as the envelopes: one publisher.
func (r *recorder) publishPacket(p *livekit.DataPacket, to []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return errNotConnected
	}
	r.packets = append(r.packets, p)
	r.order = append(r.order, "packet")
	return nil
}

func (r *recorder) setAttributes(attrs map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return errNotConnected
	}
	r.attrs = append(r.attrs, attrs)
	r.order = append(r.order, "attributes")
	return nil
}

func (r *recorder) envelopes(t *testing.T) []*wire.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*wire.Envelope
	for _, s := range r.sent {
		env, err := wire.UnmarshalLimit(s.payload, 1<<22)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

func testSession(t *testing.T, store storage.Store, id string) (*Session, *recorder) {
	rec := &recorder{}
	s := newSession(context.Background(), SessionConfig{ID: id, Store: store, Open: openEcho, Metrics: NewMetrics(nil), Logger: testenv.Log(t)}, rec)
	t.Cleanup(s.Close)
	return s, rec
}

func configure(t *testing.T, s *Session, from string, stanza, lastSeen int32) {
	b, _ := wire.Marshal(&wire.Envelope{StanzaID: stanza, ConversationID: s.ID, Body: &wire.Configuration{ConversationID: s.ID, LastSequenceSeen: lastSeen}})
	s.receive(from, b)
}

func waitFor(t *testing.T, rec *recorder, pred func([]*wire.Envelope) bool) []*wire.Envelope {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if envs := rec.envelopes(t); pred(envs) {
			return envs
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out; sent %s", describe(rec.envelopes(t)))
	return nil
}

// A greeting that went a way that may have dropped it (LiveKit's API, to
// a user whose data channel is not open yet) is repeated that way every
// greetQuickly, and over the bot's own channel as soon as that is open,
// not only at the first scheduled repeat.
func TestGreetingRepeatedUntilTheChannelOpens(t *testing.T) {
	savedAgain, savedQuickly := greetAgain, greetQuickly
	t.Cleanup(func() { greetAgain, greetQuickly = savedAgain, savedQuickly })
	greetAgain = []time.Duration{time.Hour, time.Hour}
	greetings := func(n int) func([]*wire.Envelope) bool {
		return func(envs []*wire.Envelope) bool { return count[*wire.Configuration](envs) >= n }
	}
	session := func(id string) (*Session, *recorder) {
		rec := &recorder{again: make(chan struct{}), overChannel: -1}
		s := newSession(context.Background(), SessionConfig{ID: id, Store: storage.NewMemory(storage.ReasoningPlain),
			Open: openEcho, Metrics: NewMetrics(nil), Logger: testenv.Log(t)}, rec)
		t.Cleanup(s.Close)
		return s, rec
	}

	t.Run("once the channel opens", func(t *testing.T) {
		greetQuickly = time.Hour
		s, rec := session("conv_greet_open")
		s.arrived("zoe", nil)
		waitFor(t, rec, greetings(1))
		// Proven not repeated yet: a malformed packet's answer comes after
		// anything the session had queued before it.
		s.receive("zoe", []byte("not an envelope"))
		envs := waitFor(t, rec, func(envs []*wire.Envelope) bool { return count[*wire.ErrorMessage](envs) > 0 })
		if n := count[*wire.Configuration](envs); n != 1 {
			t.Fatalf("%d greetings before the channel opened, want 1; sent %s", n, describe(envs))
		}
		close(rec.again)
		waitFor(t, rec, greetings(2))
	})
	t.Run("quickly until then", func(t *testing.T) {
		greetQuickly = time.Millisecond
		s, rec := session("conv_greet_quickly")
		s.arrived("zoe", nil)
		waitFor(t, rec, greetings(4))
		close(rec.again)
		// A repeat already on its way through the API when the channel
		// opened may still go; but once one greeting went over the
		// channel, which cannot be lost, the repeats stop until the
		// scheduled one, an hour away.
		overChannel := func() int {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return rec.overChannel
		}
		waitFor(t, rec, func([]*wire.Envelope) bool { return overChannel() >= 0 })
		s.receive("zoe", []byte("not an envelope"))
		envs := waitFor(t, rec, func(envs []*wire.Envelope) bool { return count[*wire.ErrorMessage](envs) > 0 })
		if m := count[*wire.Configuration](envs[overChannel()+1:]); m > 0 {
			t.Fatalf("%d greetings after the one sent over the open channel; sent %s", m, describe(envs))
		}
	})
}

// A user announced as in sync on the connection it handshook on (the
// SDK, back after a LiveKit restart, still names that one) whose
// connection then changes with no event is greeted on the new one, once
// LiveKit's batched updates have come: it waits for that greeting.
func TestUserMovedSilentlyIsGreeted(t *testing.T) {
	saved := batchedUpdates
	t.Cleanup(func() { batchedUpdates = saved })
	// Far longer than the barrier below takes.
	batchedUpdates = time.Second
	s, rec := testSession(t, storage.NewMemory(storage.ReasoningPlain), "conv_moved")
	configure(t, s, "zoe", 1, 0)
	waitFor(t, rec, func(envs []*wire.Envelope) bool { return count[*wire.Configuration](envs) == 1 })
	s.arrived("zoe", nil)
	// The arrival is handled (in sync: no greeting) before what zoe
	// sends next is answered.
	s.receive("zoe", []byte("not an envelope"))
	waitFor(t, rec, func(envs []*wire.Envelope) bool { return count[*wire.ErrorMessage](envs) == 1 })
	rec.reconnect("zoe", "PA_zoe_after_restart")
	envs := waitFor(t, rec, func(envs []*wire.Envelope) bool { return count[*wire.Configuration](envs) == 2 })
	rec.mu.Lock()
	to := rec.sent[len(rec.sent)-1].to
	rec.mu.Unlock()
	if _, ok := envs[len(envs)-1].Body.(*wire.Configuration); !ok || len(to) != 1 || to[0] != "zoe" {
		t.Fatalf("the last envelope is not a greeting to zoe: %s to %v", describe(envs), to)
	}
}

// After the bot rejoins (LiveKit restarted), a user it had in sync gets
// nothing but the handshake until its Configuration on its new
// connection, though the SDK still lists the old one: what is sent
// meanwhile reaches it once, by the replay. A resume keeps it in sync.
func TestRejoinPutsEveryoneOutOfSync(t *testing.T) {
	for _, c := range []struct {
		name     string
		rejoined bool
	}{{"rejoined", true}, {"resumed", false}} {
		t.Run(c.name, func(t *testing.T) {
			s, rec := testSession(t, storage.NewMemory(storage.ReasoningPlain), "conv_rejoin_"+c.name)
			configure(t, s, "zoe", 1, 0)
			greeted := waitFor(t, rec, func(envs []*wire.Envelope) bool { return count[*wire.Configuration](envs) == 1 })
			s.reconnected(c.rejoined)
			s.Send(wire.NewError(s.ID, wire.CodeServiceUnavailable, "sent between the rejoin and the handshake"))
			// Whatever the session sent zoe comes before its answer to a
			// packet that follows.
			s.receive("zoe", []byte("not an envelope"))
			envs := waitFor(t, rec, func(envs []*wire.Envelope) bool { return hasCode(envs, wire.CodeMalformed) })
			if got := hasCode(envs, wire.CodeServiceUnavailable); got != !c.rejoined {
				t.Fatalf("the envelope sent meanwhile reached zoe live: %v; sent %s", got, describe(envs))
			}
			if !c.rejoined {
				return
			}
			configure(t, s, "zoe", 2, -greeted[0].StanzaID)
			envs = waitFor(t, rec, func(envs []*wire.Envelope) bool { return hasCode(envs, wire.CodeServiceUnavailable) })
			if n := count[*wire.Configuration](envs); n != 2 {
				t.Fatalf("%d Configurations, want the greeting reply and the resume's; sent %s", n, describe(envs))
			}
		})
	}
}

func hasCode(envs []*wire.Envelope, code int32) bool {
	for _, env := range envs {
		if e, ok := env.Body.(*wire.ErrorMessage); ok && e.Code == code {
			return true
		}
	}
	return false
}

// A resume further back than the in-memory log reaches, with no durable
// log, is refused with 202 rather than replayed in part.
func TestResumeGapIsNotRecoverable(t *testing.T) {
	s, rec := testSession(t, storage.NewMemory(storage.ReasoningPlain), "conv_gap")
	for i := range replayMax + 10 {
		s.Send(&wire.Acknowledgement{ConversationID: s.ID, Notes: string(rune('a' + i%26))})
	}
	configure(t, s, "alice", 1, 3)
	envs := waitFor(t, rec, func(e []*wire.Envelope) bool { return len(e) > 0 })
	last := envs[len(envs)-1]
	em, ok := last.Body.(*wire.ErrorMessage)
	if !ok || em.Code != wire.CodeInvalidState || em.Recoverable {
		t.Fatalf("last envelope %s %+v, want a non-recoverable 202", last.Type(), last.Body)
	}
}

// After a bot restart (a new session on the same conversation), resume
// comes from the durable log: original stanza ids and bytes, and the new
// session numbers after every number the old one reserved.
func TestResumeFromTheDurableLog(t *testing.T) {
	url := testenv.Database(t)
	openStore := func() *storage.Postgres {
		p, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := openStore()
	s1, rec1 := testSession(t, first, "conv_durable")
	configure(t, s1, "alice", 1, 0)
	waitFor(t, rec1, func(e []*wire.Envelope) bool { return len(e) == 1 })
	for i := 1; i <= 30; i++ {
		s1.Send(&wire.AssistantSentence{PreviousID: "am", ConversationID: s1.ID, Sequence: int32(i), Text: "x"})
	}
	waitFor(t, rec1, func(e []*wire.Envelope) bool { return len(e) == 31 })
	s1.Close()
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	original := map[int32][]byte{}
	for _, p := range rec1.sent {
		env, _ := wire.Unmarshal(p.payload)
		original[env.StanzaID] = p.payload
	}

	second := openStore()
	t.Cleanup(func() { _ = second.Close(context.Background()) })
	s2, rec2 := testSession(t, second, "conv_durable")
	configure(t, s2, "alice", 2, 11)
	envs := waitFor(t, rec2, func(e []*wire.Envelope) bool {
		return has(e, func(b any) bool { _, ok := b.(*wire.Configuration); return ok })
	})
	if len(envs) != 21 {
		t.Fatalf("%d envelopes: %s", len(envs), describe(envs))
	}
	for i, env := range envs[:20] {
		if env.StanzaID != -int32(12+i) || !bytes.Equal(rec2.sent[i].payload, original[env.StanzaID]) {
			t.Fatalf("replayed %d: stanza %d, bytes equal %v", i, env.StanzaID, bytes.Equal(rec2.sent[i].payload, original[env.StanzaID]))
		}
	}
	if envs[20].StanzaID > -32 {
		t.Fatalf("the new session numbered its first envelope %d, reusing the first session's numbers", envs[20].StanzaID)
	}
}

func has(envs []*wire.Envelope, pred func(any) bool) bool {
	for _, e := range envs {
		if pred(e.Body) {
			return true
		}
	}
	return false
}

// crashing is a store whose process dies: envelope log writes still
// queued when it crashes are lost with it (from the crash on, none lands).
type crashing struct {
	storage.Store
	mu      sync.Mutex
	crashed bool
}

func (c *crashing) SaveEnvelope(e storage.Envelope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.crashed {
		c.Store.SaveEnvelope(e)
	}
}

// A bot that takes a conversation over after the first one crashed
// mid-answer (its connection abandoned, its queued log writes lost) never
// sends a stanza number the first one used.
func TestTakeoverAfterCrashNeverReusesStanzas(t *testing.T) {
	url := testenv.Database(t)
	openStore := func() *storage.Postgres {
		p, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		return p
	}
	first := &crashing{Store: openStore()}
	s1, rec1 := testSession(t, first, "conv_takeover")
	configure(t, s1, "alice", 1, 0)
	waitFor(t, rec1, func(e []*wire.Envelope) bool { return len(e) == 1 })
	for i := 1; i <= 10; i++ {
		s1.Send(&wire.AssistantSentence{PreviousID: "am", ConversationID: s1.ID, Sequence: int32(i), Text: "x"})
	}
	// The log holds these: the second bot's store must see them.
	waitFor(t, rec1, func(e []*wire.Envelope) bool { return len(e) == 11 })
	// The crash: what is sent from now on never reaches the log.
	first.mu.Lock()
	first.crashed = true
	first.mu.Unlock()
	for i := 11; i <= 20; i++ {
		s1.Send(&wire.AssistantSentence{PreviousID: "am", ConversationID: s1.ID, Sequence: int32(i), Text: "x"})
	}
	waitFor(t, rec1, func(e []*wire.Envelope) bool { return len(e) == 21 })

	s2, rec2 := testSession(t, openStore(), "conv_takeover")
	configure(t, s2, "alice", 2, 0)
	waitFor(t, rec2, func(e []*wire.Envelope) bool { return len(e) == 1 })
	for i := 1; i <= 10; i++ {
		s2.Send(&wire.AssistantSentence{PreviousID: "am2", ConversationID: s2.ID, Sequence: int32(i), Text: "y"})
	}
	waitFor(t, rec2, func(e []*wire.Envelope) bool { return len(e) == 11 })
	seen := map[int32]string{}
	for name, envs := range map[string][]*wire.Envelope{"first": rec1.envelopes(t), "second": rec2.envelopes(t)} {
		for _, e := range envs {
			if other, dup := seen[e.StanzaID]; dup {
				t.Fatalf("stanza %d sent by the %s bot and by the %s", e.StanzaID, other, name)
			}
			seen[e.StanzaID] = name + " bot"
		}
	}
}
