package room

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// echo is a conversation handler for the room tests: it acknowledges
// every envelope in the order handled; "burst N" streams N sentences
// from a session goroutine; "big" sends a 200 KB answer.
type echo struct {
	id   string
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func openEcho(id string) Conversation {
	e := &echo{id: id}
	e.ctx, e.stop = context.WithCancel(context.Background())
	return e
}

func (*echo) Features() []string { return []string{wire.FeatureStreaming} }

// Configure answers as the engine does: the reasoning features the
// client asked for are in effect.
func (*echo) Configure(_ context.Context, _ string, features wire.Features) []string {
	return reasoning.ModeFromFeatures(features).Features(features.PartialReasoning)
}
func (*echo) Greeting(context.Context, string) []string { return nil }
func (*echo) Recover(pipeline.Face)                     {}
func (e *echo) Close() {
	e.stop()
	e.wg.Wait()
}

func (e *echo) Handle(s pipeline.Face, in pipeline.Inbound) {
	s.Send(&wire.Acknowledgement{ConversationID: e.id, AcknowledgedStanzaID: in.StanzaID}, in.From)
	m, ok := in.Body.(*wire.UserMessage)
	if !ok {
		return
	}
	switch {
	case strings.HasPrefix(m.Content, "burst "):
		n, _ := strconv.Atoi(strings.TrimPrefix(m.Content, "burst "))
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			for i := 1; i <= n; i++ {
				select {
				case <-e.ctx.Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
				s.Send(&wire.AssistantSentence{PreviousID: "am_" + m.ID, ConversationID: e.id, Sequence: int32(i), Text: fmt.Sprintf("sentence %d", i), IsFinal: i == n})
			}
		}()
	case m.Content == "big":
		s.Send(&wire.AssistantMessage{ID: "am_big", ConversationID: e.id, Content: strings.Repeat("0123456789", 20_000)})
	}
}

type env struct {
	lk    *testenv.LiveKit
	cfg   Config
	agent *Agent
	stop  context.CancelFunc
	done  chan struct{}
}

func startAgent(t *testing.T, lk *testenv.LiveKit, store storage.Store) *env {
	t.Helper()
	return startAgentWith(t, lk, store, nil, testenv.Log(t))
}

// startAgentWith starts an agent whose configuration change may adjust.
func startAgentWith(t *testing.T, lk *testenv.LiveKit, store storage.Store, change func(*Config), log *slog.Logger) *env {
	t.Helper()
	e := runAgent(t, lk, store, change, log)
	select {
	case <-e.agent.Registered():
	case <-time.After(10 * time.Second):
		t.Fatal("the agent worker did not register")
	}
	return e
}

// runAgent starts an agent and returns without waiting for its worker to
// register.
func runAgent(t *testing.T, lk *testenv.LiveKit, store storage.Store, change func(*Config), log *slog.Logger) *env {
	cfg := Config{LiveKitURL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, AgentName: "alicia-test", EmptyTimeout: 5 * time.Second}
	if change != nil {
		change(&cfg)
	}
	a := NewAgent(cfg, store, NewMetrics(nil), openEcho, log)
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{lk: lk, cfg: a.cfg, agent: a, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		a.Run(ctx)
	}()
	t.Cleanup(e.shutdown)
	return e
}

func (e *env) shutdown() {
	e.stop()
	<-e.done
}

// client is a user's LiveKit participant speaking the Alicia protocol.
type client struct {
	t        *testing.T
	identity string
	room     *lksdk.Room
	stanza   int32
	mu       sync.Mutex
	got      []*wire.Envelope
	raw      map[int32][]byte
	notify   chan struct{}
}

// joinAs joins as a client that states its features in its token's
// attributes, so it may talk before any Configuration.
func joinAs(t *testing.T, e *env, roomName, identity string) *client {
	t.Helper()
	return joinWith(t, e, roomName, identity, map[string]string{AttrFeatures: wire.FeatureStreaming})
}

func joinWith(t *testing.T, e *env, roomName, identity string, attrs map[string]string) *client {
	t.Helper()
	token, err := UserToken(e.cfg, roomName, identity, identity, attrs)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, identity: identity, raw: map[int32][]byte{}, notify: make(chan struct{}, 1)}
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
		if u, ok := data.(*lksdk.UserDataPacket); ok && u.Topic == Topic {
			c.add(u.Payload)
		}
	}
	c.room, err = lksdk.ConnectToRoomWithToken(e.lk.URL, token, cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatalf("%s join: %v", identity, err)
	}
	_ = c.room.RegisterByteStreamHandler(Topic, func(r *lksdk.ByteStreamReader, _ string) { c.add(r.ReadAll()) })
	t.Cleanup(c.room.Disconnect)
	return c
}

// greeted joins and waits for the bot's greeting. On a loaded machine
// livekit-server has dropped the dispatch of a room created moments after
// the worker registered (the agent's log showed no job at all), so after
// 5 s without a greeting the room is dispatched again through LiveKit's
// API, as an operator would, and the test says so.
func greeted(t *testing.T, e *env, roomName, identity string) *client {
	t.Helper()
	c := joinAs(t, e, roomName, identity)
	c.awaitGreeting(e, roomName)
	return c
}

// awaitGreeting waits for the bot's greeting in roomName. LiveKit learns
// of a worker's registration after telling the worker, and drops a
// dispatch made in between: after 5 s without a greeting the room is
// dispatched to again, as an operator would, and the test says so.
func (c *client) awaitGreeting(e *env, roomName string) {
	c.t.Helper()
	greeting := func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 }
	if _, ok := c.within(5*time.Second, greeting); !ok {
		c.t.Logf("no greeting in 5 s: dispatching %s again", roomName)
		e.lk.Dispatch(c.t, e.cfg.AgentName, roomName)
	}
	c.wait("greeting", greeting)
}

func (c *client) add(payload []byte) {
	env, err := wire.UnmarshalLimit(payload, 1<<22)
	if err != nil {
		c.t.Errorf("%s received an undecodable envelope: %v", c.identity, err)
		return
	}
	c.mu.Lock()
	c.got = append(c.got, env)
	c.raw[env.StanzaID] = payload
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *client) send(body wire.Body) int32 {
	c.stanza++
	b, err := wire.Marshal(&wire.Envelope{StanzaID: c.stanza, ConversationID: c.room.Name(), Body: body})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(b)
	return c.stanza
}

func (c *client) sendRaw(b []byte) {
	if err := c.room.LocalParticipant.PublishDataPacket(lksdk.UserData(b), lksdk.WithDataPublishReliable(true),
		lksdk.WithDataPublishTopic(Topic)); err != nil {
		c.t.Fatal(err)
	}
}

// wait returns the received envelopes once pred holds for them.
func (c *client) wait(what string, pred func([]*wire.Envelope) bool) []*wire.Envelope {
	c.t.Helper()
	got, ok := c.within(15*time.Second, pred)
	if !ok {
		c.t.Fatalf("%s: timed out waiting for %s; got %d envelopes: %s", c.identity, what, len(got), describe(got))
	}
	return got
}

// within returns the received envelopes once pred holds for them, or
// what came in d and false.
func (c *client) within(d time.Duration, pred func([]*wire.Envelope) bool) ([]*wire.Envelope, bool) {
	deadline := time.After(d)
	for {
		c.mu.Lock()
		got := slices.Clone(c.got)
		c.mu.Unlock()
		if pred(got) {
			return got, true
		}
		select {
		case <-c.notify:
		case <-deadline:
			return got, false
		}
	}
}

func describe(envs []*wire.Envelope) string {
	var b strings.Builder
	for _, e := range envs {
		fmt.Fprintf(&b, "%d:%s ", e.StanzaID, e.Type())
	}
	return b.String()
}

func count[T any](envs []*wire.Envelope) int {
	n := 0
	for _, e := range envs {
		if _, ok := e.Body.(T); ok {
			n++
		}
	}
	return n
}

func first[T any](envs []*wire.Envelope) (T, *wire.Envelope) {
	var zero T
	for _, e := range envs {
		if b, ok := e.Body.(T); ok {
			return b, e
		}
	}
	return zero, nil
}

// A user token whose room configuration names the agent brings the bot,
// whose Configuration reaches the user; the user's Configuration is
// answered with the conversation id and the effective features.
func TestDispatchAndHandshake(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	// Not measured: the first room after the worker registered, whose
	// dispatch a loaded livekit-server may drop (greeted).
	greeted(t, e, "conv_dispatch_first", "alice").room.Disconnect()
	var delays []time.Duration
	for i := range 10 {
		start := time.Now()
		c := joinAs(t, e, fmt.Sprintf("conv_dispatch_%d", i), "alice")
		c.wait("the bot's Configuration", func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 })
		delays = append(delays, time.Since(start))
		if i == 0 {
			c.send(&wire.Configuration{Features: []string{wire.FeatureStreaming, wire.FeatureReasoningSummary}})
			// The reply, not a second greeting that was on its way: only the
			// reply can carry the reasoning the user just asked for.
			isReply := func(e *wire.Envelope) bool {
				cfg, ok := e.Body.(*wire.Configuration)
				return ok && slices.Contains(cfg.Features, wire.FeatureReasoningSummary)
			}
			got := c.wait("the reply", func(g []*wire.Envelope) bool { return slices.ContainsFunc(g, isReply) })
			reply := got[slices.IndexFunc(got, isReply)].Body.(*wire.Configuration)
			if reply.ConversationID != "conv_dispatch_0" || !slices.Contains(reply.Features, wire.FeatureStreaming) {
				t.Fatalf("reply %+v", reply)
			}
		}
		c.room.Disconnect()
	}
	slices.Sort(delays)
	t.Logf("user join → bot Configuration: median %v, p95 %v (n=%d, join included)", delays[len(delays)/2], delays[len(delays)*95/100], len(delays))
}

// 500 envelopes sent at once are handled in arrival order, one at a time,
// and the answers leave numbered −1, −2, −3… in order.
func TestOrderingUnderBurst(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	c := greeted(t, e, "conv_burst", "alice")
	for i := range 500 {
		c.send(&wire.Commentary{ID: fmt.Sprintf("cm_%d", i), ConversationID: "conv_burst", TargetID: "x", AuthorRole: wire.AuthorUser, Content: "ok"})
	}
	got := c.wait("500 acknowledgements", func(g []*wire.Envelope) bool { return count[*wire.Acknowledgement](g) >= 500 })
	want := int32(1)
	prev := int32(0)
	for _, env := range got {
		if prev != 0 && env.StanzaID != prev-1 {
			t.Fatalf("server stanzas out of order: %d after %d", env.StanzaID, prev)
		}
		prev = env.StanzaID
		if ack, ok := env.Body.(*wire.Acknowledgement); ok {
			if ack.AcknowledgedStanzaID != want {
				t.Fatalf("acknowledgement %d for client stanza %d, want %d", env.StanzaID, ack.AcknowledgedStanzaID, want)
			}
			want++
		}
	}
}

// Bad input gets an ErrorMessage with the right code and the offending
// stanza id; the session goes on.
func TestBadInput(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	c := greeted(t, e, "conv_bad", "alice")
	valid := func(stanza int32, body wire.Body) []byte {
		b, _ := wire.Marshal(&wire.Envelope{StanzaID: stanza, ConversationID: "conv_bad", Body: body})
		return b
	}
	wrongType := valid(3, &wire.UserMessage{ID: "m", ConversationID: "conv_bad", Content: "x"})
	wrongType = []byte(strings.Replace(string(wrongType), "\xa7content\xa1x", "\xa7content\x07", 1))
	unknown := valid(2, &wire.Acknowledgement{ConversationID: "conv_bad"})
	unknown[len("\x84\xa8stanzaId\x02\xaeconversationId\xa8conv_bad\xa4type")] = 99
	cases := []struct {
		name    string
		payload []byte
		code    int32
		stanza  int32 // 0: none can be named
	}{
		{"undecodable bytes", []byte{0xc1, 0x00, 0x01}, wire.CodeMalformed, 0},
		{"unknown type", unknown, wire.CodeUnknownType, 2},
		{"wrong field type", wrongType, wire.CodeMalformed, 3},
		{"oversized", append(valid(4, &wire.UserMessage{ID: "m", ConversationID: "conv_bad", Content: strings.Repeat("x", 16_000)}), 0), wire.CodeMalformed, 0},
		{"server stanza sign", valid(-5, &wire.UserMessage{ID: "m", ConversationID: "conv_bad", Content: "x"}), wire.CodeMalformed, -5},
		{"another conversation", func() []byte {
			b, _ := wire.Marshal(&wire.Envelope{StanzaID: 6, ConversationID: "conv_other", Body: &wire.Commentary{ID: "c", ConversationID: "conv_other", TargetID: "t", AuthorRole: "user", Content: "x"}})
			return b
		}(), wire.CodeConversationNotFound, 6},
	}
	for i, tc := range cases {
		c.sendRaw(tc.payload)
		got := c.wait(tc.name, func(g []*wire.Envelope) bool { return count[*wire.ErrorMessage](g) > i })
		var em *wire.ErrorMessage
		var envl *wire.Envelope
		n := 0
		for _, env := range got {
			if m, ok := env.Body.(*wire.ErrorMessage); ok {
				if n == i {
					em, envl = m, env
				}
				n++
			}
		}
		if em.Code != tc.code || !em.Recoverable || em.Message == "" {
			t.Errorf("%s: error %+v", tc.name, em)
		}
		if tc.stanza != 0 && envl.Meta["originatingStanzaId"] != int64(tc.stanza) {
			t.Errorf("%s: originatingStanzaId %v, want %d", tc.name, envl.Meta["originatingStanzaId"], tc.stanza)
		}
	}
	// The session goes on.
	c.stanza = 10
	s := c.send(&wire.Commentary{ID: "ok", ConversationID: "conv_bad", TargetID: "t", AuthorRole: "user", Content: "still there?"})
	c.wait("an answer after bad input", func(g []*wire.Envelope) bool {
		for _, env := range g {
			if a, ok := env.Body.(*wire.Acknowledgement); ok && a.AcknowledgedStanzaID == s {
				return true
			}
		}
		return false
	})
}

// A client that drops mid-stream and comes back with lastSequenceSeen gets
// every later envelope again, exactly once, with the original stanza ids
// and bytes, in order, before anything new.
func TestResumeAfterClientDisconnect(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	c := greeted(t, e, "conv_resume", "alice")
	c.send(&wire.UserMessage{ID: "m1", ConversationID: "conv_resume", Content: "burst 40"})
	got := c.wait("ten sentences", func(g []*wire.Envelope) bool { return count[*wire.AssistantSentence](g) >= 10 })
	c.room.Disconnect()
	lastSeen := int32(0)
	for _, env := range got {
		lastSeen = max(lastSeen, -env.StanzaID)
	}
	// The bot notices the departure (LiveKit tells it the participant
	// left), then goes on sending while the client is away. A client that
	// comes back under the same identity before LiveKit has told the bot
	// may receive a live envelope ahead of its replay: see the closing
	// note of the room issue.
	sess := e.agent.sessions()[0]
	testenv.Eventually(t, "the bot to learn that the client left", func() bool { return sess.out.connection("alice") == "" })
	time.Sleep(500 * time.Millisecond) // the bot goes on sending

	c2 := joinAs(t, e, "conv_resume", "alice")
	c2.stanza = c.stanza
	c2.send(&wire.Configuration{ConversationID: "conv_resume", LastSequenceSeen: lastSeen})
	c2.wait("the rest of the answer", func(g []*wire.Envelope) bool {
		_, final := first[*wire.AssistantSentence](g)
		for _, env := range g {
			if s, ok := env.Body.(*wire.AssistantSentence); ok && s.IsFinal {
				return final != nil
			}
		}
		return false
	})
	// The reply may trail a replayed final sentence. The session is
	// ordered: once an envelope sent now is acknowledged, everything
	// queued before its acknowledgement has landed.
	barrier := c2.send(&wire.Commentary{ID: "cm_barrier", ConversationID: "conv_resume"})
	all := c2.wait("the barrier's acknowledgement", func(g []*wire.Envelope) bool {
		for _, env := range g {
			if a, ok := env.Body.(*wire.Acknowledgement); ok && a.AcknowledgedStanzaID == barrier {
				return true
			}
		}
		return false
	})
	logged := map[int32][]byte{}
	read := make(chan struct{})
	sess.post(func() { // the ring is the writer's
		for _, s := range sess.ring {
			logged[s.stanza] = s.payload
		}
		close(read)
	})
	<-read
	c2.mu.Lock()
	raw := maps.Clone(c2.raw)
	c2.mu.Unlock()
	// The reply to the client's Configuration is the last Configuration
	// sent to it; greetings may come before it, never after.
	reply := int32(0)
	for _, env := range all {
		if _, ok := env.Body.(*wire.Configuration); ok {
			reply = -env.StanzaID
		}
	}
	if reply == 0 {
		t.Fatalf("no reply to the Configuration: %s", describe(all))
	}
	seen := map[int32]bool{}
	var sentences []int32
	replyReceived := false
	for _, env := range all {
		if seen[env.StanzaID] {
			t.Fatalf("stanza %d received twice: %s", env.StanzaID, describe(all))
		}
		seen[env.StanzaID] = true
		if -env.StanzaID <= lastSeen {
			t.Fatalf("stanza %d was seen before the disconnect", env.StanzaID)
		}
		if string(raw[env.StanzaID]) != string(logged[env.StanzaID]) {
			t.Fatalf("stanza %d: bytes differ from the original", env.StanzaID)
		}
		if -env.StanzaID == reply {
			replyReceived = true
		}
		if s, ok := env.Body.(*wire.AssistantSentence); ok {
			// Everything sent before the reply is replay and comes before
			// it; everything after is new.
			if replyReceived != (-env.StanzaID > reply) {
				t.Fatalf("stanza %d arrived on the wrong side of the reply %d", env.StanzaID, -reply)
			}
			sentences = append(sentences, s.Sequence)
		}
	}
	for _, env := range got {
		if s, ok := env.Body.(*wire.AssistantSentence); ok {
			sentences = append([]int32{s.Sequence}, sentences...)
		}
	}
	slices.Sort(sentences)
	if len(sentences) != 40 || sentences[0] != 1 || sentences[39] != 40 || len(slices.Compact(slices.Clone(sentences))) != 40 {
		t.Fatalf("sentences across the reconnect: %v", sentences)
	}

}

// After the LiveKit server restarts, the bot's connection comes back and a
// resuming client gets what it missed.
func TestResumeAfterLiveKitRestart(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	c := greeted(t, e, "conv_restart", "alice")
	c.send(&wire.UserMessage{ID: "m1", ConversationID: "conv_restart", Content: "burst 150"})
	got := c.wait("a few sentences", func(g []*wire.Envelope) bool { return count[*wire.AssistantSentence](g) >= 5 })
	lastSeen := int32(0)
	for _, env := range got {
		lastSeen = max(lastSeen, -env.StanzaID)
	}
	botBefore := c.room.GetParticipantByIdentity(BotIdentity).SID()
	c.room.Disconnect()
	lk.Kill()
	time.Sleep(time.Second)
	if err := lk.Start(); err != nil {
		t.Fatal(err)
	}
	// The bot's SDK rejoins by itself (a new room on the restarted server).
	deadline := time.Now().Add(30 * time.Second)
	var c2 *client
	for {
		c2 = joinAs(t, e, "conv_restart", "alice")
		if bot := waitForBot(c2, 3*time.Second); bot {
			break
		}
		c2.room.Disconnect()
		if time.Now().After(deadline) {
			t.Fatal("the bot never came back to the room")
		}
	}
	// What tells the bot's rejoin from a resume: a new participant id.
	if after := c2.room.GetParticipantByIdentity(BotIdentity).SID(); after == botBefore {
		t.Fatalf("the bot is back under its old participant id %s", after)
	}
	c2.stanza = 100
	c2.send(&wire.Configuration{ConversationID: "conv_restart", LastSequenceSeen: lastSeen})
	all := c2.wait("the final sentence", func(g []*wire.Envelope) bool {
		for _, env := range g {
			if s, ok := env.Body.(*wire.AssistantSentence); ok && s.IsFinal {
				return true
			}
		}
		return false
	})
	seq := map[int32]bool{}
	for _, env := range append(got, all...) {
		if s, ok := env.Body.(*wire.AssistantSentence); ok {
			if seq[s.Sequence] {
				t.Fatalf("sentence %d twice (stanza %d); lastSeen %d\nbefore: %s\nafter: %s", s.Sequence, env.StanzaID, lastSeen, describe(got), describe(all))
			}
			seq[s.Sequence] = true
		}
	}
	if len(seq) != 150 {
		t.Fatalf("%d of 150 sentences across the restart", len(seq))
	}
}

func waitForBot(c *client, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if p := c.room.GetParticipantByIdentity(BotIdentity); p != nil {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// A 200 KB envelope travels as a byte stream and arrives whole.
func TestLargeEnvelopeArrivesWhole(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	c := greeted(t, e, "conv_big", "alice")
	c.send(&wire.UserMessage{ID: "m1", ConversationID: "conv_big", Content: "big"})
	got := c.wait("the big answer", func(g []*wire.Envelope) bool { return count[*wire.AssistantMessage](g) > 0 })
	m, _ := first[*wire.AssistantMessage](got)
	if m.Content != strings.Repeat("0123456789", 20_000) {
		t.Fatalf("answer of %d bytes arrived", len(m.Content))
	}
}
