package room

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// Topic is the data topic of the Alicia protocol. Packets without a topic
// are accepted too, from clients older than it.
const Topic = "alicia"

// Conversation is the engine's side of a room (pipeline.Conversation):
// the session hands it every client envelope except the handshake's, in
// arrival order, and the features each client announced, as data.
type Conversation interface {
	// Handle must not block.
	Handle(face pipeline.Face, in pipeline.Inbound)
	// Configure takes a client's features and returns the reasoning
	// features in effect for it; Greeting those of a client not yet
	// configured.
	Configure(ctx context.Context, identity string, features []string) []string
	Greeting(ctx context.Context, identity string) []string
	// Features are the server's own features stated in its Configuration.
	Features() []string
	Close()
}

// publisher sends bytes into the room; a Conn does it over LiveKit.
type publisher interface {
	// publish sends one packet of at most wire.MaxPacketBytes.
	publish(payload []byte, to []string) error
	// publishStream sends a larger payload as a LiveKit byte stream.
	publishStream(payload []byte, to []string) error
	// connection names the identity's current connection ("" if absent).
	connection(identity string) string
	// attributes asks LiveKit for a participant's attributes, for one
	// whose packets reach the bot before the bot is told it joined.
	attributes(ctx context.Context, identity string) (map[string]string, error)
}

// sent is one envelope in the session's replay log.
type sent struct {
	stanza  int32
	payload []byte
	to      []string
	// handshake envelopes (greetings, handshake errors) reach their
	// connection at once and are never replayed.
	handshake bool
}

// Session owns one conversation: the envelopes that come in, handled in
// order, and the envelopes that go out, numbered −1, −2, −3… and sent in
// that order.
type Session struct {
	ID      string
	log     *slog.Logger
	store   storage.Store
	conv    Conversation
	metrics *Metrics
	out     publisher

	inbox chan rawPacket
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	sendMu sync.Mutex
	next   int32 // magnitude of the next server stanza
	// members maps each user in the room to the connection that is in
	// sync ("" until its handshake). A user who (re)joined receives nothing
	// but the handshake until its Configuration: what it missed, and what
	// is sent meanwhile, reaches it once, by replay. LiveKit replaces a
	// quickly rejoining participant without any event, so the connection
	// id is checked at every send.
	members map[string]string
	replay  []sent
	// replayBytes bounds the in-memory log by size as well as count.
	replayBytes int

	seenMu sync.Mutex
	seen   map[string]map[int32]uint64 // identity → client stanza → payload hash

	ownerMu sync.Mutex
	owner   string
	// present: the users in the room now.
	present map[string]bool
	// features and tools each client announced, in its Configuration or
	// its participant attributes (the later of the two), without the
	// preference it may have stated.
	features map[string][]string
	tools    map[string][]wire.ClientTool
	// known: the users whose clients said what they can display, on their
	// current connection.
	known map[string]bool

	// held: what users sent before their clients said what they can
	// display, answered once they have. Owned by the run goroutine.
	held map[string][]pipeline.Inbound
	// asked: users whose attributes were fetched from LiveKit because
	// their packets came before their arrival. Owned by the run goroutine.
	asked map[string]bool
}

// Participant attributes a client sets (with setAttributes, or through
// POST /v1/token into its token) instead of, or besides, sending a
// Configuration: LiveKit keeps them and syncs them to a bot that joins
// later, where a data packet sent before the bot joined reaches nobody.
const (
	// AttrFeatures is the client's features, comma-separated, as in a
	// Configuration ("streaming,reasoning_steps,partial_reasoning").
	AttrFeatures = "alicia.features"
	// AttrReasoningPreference sets the user's show-reasoning preference
	// (off, summary or full), like the reasoning_preference:<mode> feature.
	AttrReasoningPreference = "alicia.reasoning_preference"
)

// FeatureAwaitingConfiguration marks a greeting to a client whose
// capabilities the bot does not know: it must send a Configuration (or set
// AttrFeatures) before its messages are answered.
const FeatureAwaitingConfiguration = "awaiting_configuration"

// heldMax bounds what one unconfigured user can make the bot keep.
const heldMax = 64

const (
	replayMax      = 4096
	replayMaxBytes = 16 << 20
	seenMax        = 4096
	inboxSize      = 2048
)

type rawPacket struct {
	from     string
	payload  []byte
	received time.Time
	// event: a room event rather than a data packet, queued with the
	// packets so that a Configuration and an attribute change are applied
	// in the order they arrived (the later wins).
	event eventKind
	attrs map[string]string
}

type eventKind uint8

const (
	eventNone eventKind = iota
	eventArrived
	eventLeft
	eventAttributes
)

// SessionConfig builds a Session.
type SessionConfig struct {
	ID      string
	Store   storage.Store
	Open    func(id string) Conversation
	Metrics *Metrics
	Logger  *slog.Logger
}

func newSession(parent context.Context, c SessionConfig, out publisher) *Session {
	s := &Session{ID: c.ID, log: c.Logger.With("conversation", c.ID), store: c.Store,
		metrics: c.Metrics, out: out, inbox: make(chan rawPacket, inboxSize), next: 1,
		seen: map[string]map[int32]uint64{}, members: map[string]string{}, present: map[string]bool{}, features: map[string][]string{}, tools: map[string][]wire.ClientTool{},
		known: map[string]bool{}, held: map[string][]pipeline.Inbound{}, asked: map[string]bool{}}
	s.ctx, s.stop = context.WithCancel(parent)
	// Continue the conversation's stanza count where the durable log left
	// it: a bot that took over after a restart must never reuse a number.
	if s.store.Durable() {
		if last, err := s.store.LastStanza(s.ctx, c.ID); err == nil {
			s.next = last + 1
		} else {
			s.log.Error("reading the last stanza", "err", err)
		}
	}
	s.conv = c.Open(c.ID)
	s.wg.Add(1)
	go s.run()
	return s
}

// Members is the users in the room with what each client announced:
// the engine's Roster.
func (s *Session) Members() []pipeline.Member {
	s.ownerMu.Lock()
	defer s.ownerMu.Unlock()
	ids := slices.Sorted(maps.Keys(s.present))
	out := make([]pipeline.Member, 0, len(ids))
	for _, id := range ids {
		out = append(out, pipeline.Member{Identity: id, Features: s.features[id], Tools: s.tools[id]})
	}
	return out
}

// receive queues a packet from the room; the SDK's callback must not
// block, so a full inbox answers 504 instead.
func (s *Session) receive(from string, payload []byte) {
	select {
	case s.inbox <- rawPacket{from: from, payload: payload, received: time.Now()}:
	default:
		s.metrics.badInput.WithLabelValues("504").Inc()
		s.sendError(from, wire.CodeQueueFull, wire.SeverityWarning, true, "too many envelopes at once; send this one again", 0, false, "")
	}
}

// arrived, left and attributesChanged queue a room event for identity.
// They wait for room in the inbox rather than drop the event: a lost
// arrival or attribute change would leave a user unanswered.
func (s *Session) arrived(identity string, attrs map[string]string) {
	s.event(rawPacket{from: identity, event: eventArrived, attrs: attrs})
}

func (s *Session) left(identity string) { s.event(rawPacket{from: identity, event: eventLeft}) }

func (s *Session) attributesChanged(identity string, attrs map[string]string) {
	s.event(rawPacket{from: identity, event: eventAttributes, attrs: attrs})
}

func (s *Session) event(p rawPacket) {
	select {
	case s.inbox <- p:
	case <-s.ctx.Done():
	}
}

func (s *Session) run() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case p := <-s.inbox:
			s.handle(p)
		}
	}
}

func (s *Session) handle(p rawPacket) {
	switch p.event {
	case eventArrived:
		if s.join(p.from) {
			// It handshook before the bot heard of it: its Configuration
			// is newer than its token's attributes, and it was answered.
			return
		}
		s.applyAttributes(p.from, p.attrs, false)
		s.welcome(p.from)
		return
	case eventLeft:
		delete(s.asked, p.from)
		s.leave(p.from)
		return
	case eventAttributes:
		s.applyAttributes(p.from, p.attrs, true)
		return
	}
	if !s.isKnown(p.from) && !s.asked[p.from] && s.out.connection(p.from) == "" {
		// LiveKit can deliver a client's packets to the bot seconds before
		// it announces the client (with its attributes): ask for them now,
		// so that they come before this packet, which is newer.
		s.asked[p.from] = true
		ctx, cancel := context.WithTimeout(s.ctx, 3*time.Second)
		attrs, err := s.out.attributes(ctx, p.from)
		cancel()
		if err != nil {
			s.log.Warn("reading the attributes of a participant the bot was not told of yet", "identity", p.from, "err", err)
		} else {
			s.applyAttributes(p.from, attrs, false)
		}
	}
	env, err := wire.Unmarshal(p.payload)
	if err != nil {
		var de *wire.DecodeError
		if !errors.As(err, &de) {
			de = &wire.DecodeError{Code: wire.CodeMalformed, Reason: err.Error()}
		}
		s.metrics.badInput.WithLabelValues(strconv.Itoa(int(de.Code))).Inc()
		s.log.Warn("bad envelope", "from", p.from, "err", err)
		s.sendError(p.from, de.Code, wire.SeverityError, true, de.Error(), de.StanzaID, de.HasStanzaID, "")
		return
	}
	if env.StanzaID <= 0 {
		// A client numbers 1, 2, 3…: a zero or negative stanza claims to
		// come from a server.
		s.metrics.badInput.WithLabelValues("101").Inc()
		s.sendError(p.from, wire.CodeMalformed, wire.SeverityError, true,
			fmt.Sprintf("stanza %d: clients number their envelopes 1, 2, 3…; negative stanzas are the server's", env.StanzaID), env.StanzaID, true, bodyID(env))
		return
	}
	if env.ConversationID != "" && env.ConversationID != s.ID {
		s.metrics.badInput.WithLabelValues("201").Inc()
		s.sendError(p.from, wire.CodeConversationNotFound, wire.SeverityError, true,
			fmt.Sprintf("this room is conversation %s, not %s", s.ID, env.ConversationID), env.StanzaID, true, bodyID(env))
		return
	}
	if s.duplicate(p.from, env.StanzaID, p.payload) {
		// Handled already (a client re-sending after a reconnect): say so
		// again, do nothing twice.
		s.Send(&wire.Acknowledgement{ConversationID: s.ID, AcknowledgedStanzaID: env.StanzaID, AcknowledgedMessageID: bodyID(env), Notes: "duplicate"}, p.from)
		return
	}
	s.log.Debug("envelope", "from", p.from, "stanza", env.StanzaID, "type", env.Type())
	if waitsForCapabilities(env.Body) && !s.isKnown(p.from) {
		s.hold(p.from, pipeline.Inbound{From: p.from, StanzaID: env.StanzaID, Body: env.Body, Received: p.received}, bodyID(env))
		return
	}
	if _, isConfig := env.Body.(*wire.Configuration); !isConfig {
		// A client that talks without a handshake is in sync from now on.
		s.sendMu.Lock()
		s.sync(p.from)
		s.sendMu.Unlock()
	}
	switch body := env.Body.(type) {
	case *wire.Configuration:
		s.configure(p.from, env.StanzaID, body)
	case *wire.Acknowledgement:
		// Nothing to do: replay is driven by Configuration.
	default:
		s.conv.Handle(s, pipeline.Inbound{From: p.from, StanzaID: env.StanzaID, Body: env.Body, Received: p.received})
	}
}

// waitsForCapabilities: envelopes whose answer depends on what the client
// can display. A stop, an acknowledgement and a tool result do not.
func waitsForCapabilities(b wire.Body) bool {
	switch b.(type) {
	case *wire.Configuration, *wire.Acknowledgement, *wire.ControlStop, *wire.ToolUseResult:
		return false
	}
	return true
}

func (s *Session) isKnown(identity string) bool {
	s.ownerMu.Lock()
	defer s.ownerMu.Unlock()
	return s.known[identity]
}

// hold keeps an envelope from a client that has not said what it can
// display, instead of answering it as a client that can display nothing,
// and asks the client, once, for its Configuration.
func (s *Session) hold(from string, in pipeline.Inbound, id string) {
	if len(s.held[from]) >= heldMax {
		s.metrics.badInput.WithLabelValues("504").Inc()
		s.sendError(from, wire.CodeQueueFull, wire.SeverityWarning, true,
			"too many messages waiting for this client's Configuration; send a Configuration, then this message again", in.StanzaID, true, id)
		return
	}
	s.held[from] = append(s.held[from], in)
	if len(s.held[from]) == 1 {
		s.log.Info("message before the client's Configuration; kept until it comes", "identity", from)
		s.sendError(from, wire.CodeInvalidState, wire.SeverityWarning, true,
			"waiting for this client's Configuration: send one (or set the participant attribute "+AttrFeatures+
				") saying what it can display; this message is kept and answered then", in.StanzaID, true, id)
	}
}

// release hands the engine what a now configured client sent before.
func (s *Session) release(identity string) {
	held := s.held[identity]
	if len(held) == 0 {
		return
	}
	delete(s.held, identity)
	s.sendMu.Lock()
	s.sync(identity)
	s.sendMu.Unlock()
	for _, in := range held {
		s.conv.Handle(s, in)
	}
}

// claim makes the first user who configured a client the conversation's
// owner. Called with ownerMu held.
func (s *Session) claim(identity string) {
	if s.owner == "" {
		s.owner = identity
		s.store.SaveConversation(storage.Conversation{ID: s.ID, Owner: identity, CreatedAt: time.Now()})
	}
}

// withoutPreference drops reasoning_preference:<mode> from features: it
// is applied once, when the client says it, and not again with every
// later Configure of the same features.
func withoutPreference(features []string) []string {
	return slices.DeleteFunc(slices.Clone(features), func(f string) bool { return strings.HasPrefix(f, reasoning.PreferencePrefix) })
}

// applyAttributes reads a participant's Alicia attributes: its features,
// and maybe a preference to set. A client whose capabilities become known
// this way is answered what it sent before; one already talking gets the
// server's Configuration again, stating what is in effect now.
func (s *Session) applyAttributes(identity string, attrs map[string]string, changed bool) {
	list, hasFeatures := attrs[AttrFeatures]
	pref, hasPref := attrs[AttrReasoningPreference]
	if !hasFeatures && !hasPref {
		return // not an Alicia client's attributes
	}
	s.ownerMu.Lock()
	features := s.features[identity]
	if hasFeatures {
		features = splitFeatures(list)
		s.features[identity] = features
		s.known[identity] = true
		s.claim(identity)
	}
	known := s.known[identity]
	s.ownerMu.Unlock()
	given := features
	if hasPref {
		given = append(slices.Clone(features), reasoning.PreferencePrefix+strings.TrimSpace(pref))
	}
	effective := s.conv.Configure(s.ctx, identity, given)
	if !known || !changed {
		return // the greeting that follows an arrival states it
	}
	reply := s.configuration(identity, effective)
	s.sendMu.Lock()
	if s.members[identity] != "" || len(s.held[identity]) > 0 {
		s.sync(identity)
		s.sendLocked(reply, []string{identity}, nil, true)
	}
	s.sendMu.Unlock()
	s.release(identity)
}

// splitFeatures reads AttrFeatures: comma-separated, spaces ignored.
func splitFeatures(list string) []string {
	var out []string
	for f := range strings.SplitSeq(list, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return withoutPreference(out)
}

// duplicate reports a client stanza handled before with the same bytes. A
// client that starts counting at 1 again (a reloaded page) sends different
// bytes under an old number, which is new work.
func (s *Session) duplicate(from string, stanza int32, payload []byte) bool {
	h := fnv.New64a()
	h.Write(payload)
	sum := h.Sum64()
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	m := s.seen[from]
	if m == nil {
		m = map[int32]uint64{}
		s.seen[from] = m
	}
	if old, ok := m[stanza]; ok && old == sum {
		return true
	}
	if len(m) >= seenMax {
		for k := range m { // forget the oldest numbers first
			if k < stanza-seenMax {
				delete(m, k)
			}
		}
	}
	m[stanza] = sum
	return false
}

func bodyID(env *wire.Envelope) string {
	switch b := env.Body.(type) {
	case *wire.UserMessage:
		return b.ID
	case *wire.Transcription:
		return b.ID
	case *wire.ToolUseResult:
		return b.RequestID
	case *wire.ControlVariation:
		return b.TargetID
	case *wire.ControlStop:
		return b.TargetID
	case *wire.Commentary:
		return b.ID
	}
	return ""
}

// configure answers a client's Configuration: reasoning preferences,
// resume, then the server's own Configuration.
func (s *Session) configure(from string, stanza int32, c *wire.Configuration) {
	s.ownerMu.Lock()
	s.claim(from)
	s.features[from] = withoutPreference(c.Features)
	s.tools[from] = slices.Clone(c.Tools)
	s.known[from] = true
	s.ownerMu.Unlock()
	// What reasoning the user sees is the engine's to decide, from the
	// client's features.
	effective := s.conv.Configure(s.ctx, from, c.Features)
	reply := s.configuration(from, effective)
	s.sendMu.Lock()
	if c.LastSequenceSeen > 0 {
		if !s.replayLocked(from, c.LastSequenceSeen) {
			s.sendLocked(errorBody(s.ID, wire.CodeInvalidState, wire.SeverityError, false,
				fmt.Sprintf("cannot resume after stanza -%d: the envelopes after it are no longer kept; start again", c.LastSequenceSeen), ""),
				[]string{from}, map[string]any{"originatingStanzaId": stanza}, true)
			s.sendMu.Unlock()
			return
		}
	}
	s.sync(from)
	s.sendLocked(reply, []string{from}, nil, true)
	s.sendMu.Unlock()
	s.release(from)
}

// unannounced stands for the connection of a user in sync whose
// participant the bot's room does not list yet: LiveKit can deliver a
// client's packets to the bot seconds before it announces the client.
const unannounced = "?"

// sync records the user's current connection as in sync; the user is in
// the room, whether or not the bot was told yet. Called with sendMu held.
func (s *Session) sync(identity string) {
	s.ownerMu.Lock()
	s.present[identity] = true
	s.ownerMu.Unlock()
	if c := s.out.connection(identity); c != "" {
		s.members[identity] = c
	} else {
		s.members[identity] = unannounced
	}
}

// join records a user who entered the room: out of sync until its
// handshake, unless it handshook on this very connection before the bot
// was told it had joined. It reports whether the user is in sync.
func (s *Session) join(identity string) bool {
	s.log.Debug("member joined", "identity", identity)
	s.ownerMu.Lock()
	s.present[identity] = true
	s.ownerMu.Unlock()
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if m := s.members[identity]; m == unannounced || (m != "" && m == s.out.connection(identity)) {
		s.sync(identity)
		return true
	}
	s.members[identity] = ""
	return false
}

// leave marks a user gone: out of sync, since the next connection under
// its identity may announce itself with no join event (a quick rejoin
// replaces the old connection).
func (s *Session) leave(identity string) {
	s.log.Debug("member left", "identity", identity)
	s.ownerMu.Lock()
	delete(s.present, identity)
	// The next connection under this identity may be another device:
	// it says what it can display again.
	delete(s.known, identity)
	s.ownerMu.Unlock()
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.members[identity] = ""
}

func (s *Session) configuration(identity string, reasoningFeatures []string) *wire.Configuration {
	features := slices.Clone(s.conv.Features())
	features = append(features, reasoningFeatures...)
	var last int32
	s.seenMu.Lock()
	for k := range s.seen[identity] {
		last = max(last, k)
	}
	s.seenMu.Unlock()
	return &wire.Configuration{ConversationID: s.ID, LastSequenceSeen: last, Features: features}
}

// greetAgain re-sends the greeting to a user who has not answered it: a
// greeting sent the instant a user joins can beat the user's data channel
// and be lost, and the handshake must not depend on who came first.
var greetAgain = []time.Duration{time.Second, 3 * time.Second}

// welcome greets a user who joined, and greets again until the user's
// Configuration arrives.
func (s *Session) welcome(identity string) {
	s.greet(identity)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for _, d := range greetAgain {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(d):
			}
			greeting := s.greeting(identity)
			s.sendMu.Lock()
			// Checked and sent under one lock: a greeting never follows
			// the reply to the user's Configuration.
			if s.members[identity] != "" || s.out.connection(identity) == "" {
				s.sendMu.Unlock()
				return
			}
			s.sendLocked(greeting, []string{identity}, nil, true)
			s.sendMu.Unlock()
		}
	}()
}

// greet sends the server's Configuration, unasked: to the room when the
// bot joins, to one participant when it joins later. Either side may
// speak first.
func (s *Session) greet(identity string) {
	greeting := s.greeting(identity)
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.sendLocked(greeting, []string{identity}, nil, true)
}

// greeting is built before the send lock is taken: the engine may read
// storage for it. It tells a client whose capabilities are unknown that
// its Configuration is awaited.
func (s *Session) greeting(identity string) *wire.Configuration {
	s.ownerMu.Lock()
	known, features := s.known[identity], s.features[identity]
	s.ownerMu.Unlock()
	if known {
		return s.configuration(identity, s.conv.Configure(s.ctx, identity, features))
	}
	return s.configuration(identity, append(s.conv.Greeting(s.ctx, identity), FeatureAwaitingConfiguration))
}

// replayLocked re-sends the envelopes after stanza −after that were
// addressed to identity, exactly once each, with their original numbers
// and bytes: the older ones from the durable log, the recent ones from
// memory (the durable writer may lag). false means some are no longer
// kept anywhere.
func (s *Session) replayLocked(identity string, after int32) bool {
	s.log.Debug("replay", "identity", identity, "after", after, "next", s.next, "kept", len(s.replay))
	switch {
	case after > s.next-1:
		return false // the client saw stanzas this session never sent: its state is gone
	case after == s.next-1:
		return true // nothing was missed
	}
	// Stanzas whose magnitude is at least oldest are in memory.
	oldest := s.next
	if len(s.replay) > 0 {
		oldest = -s.replay[0].stanza
	}
	if oldest > after+1 {
		if !s.store.Durable() {
			return false
		}
		envs, err := s.store.Envelopes(s.ctx, s.ID, after, identity)
		if err != nil {
			s.log.Error("reading the envelope log", "err", err)
			return false
		}
		for _, e := range envs {
			if -e.StanzaID < oldest {
				s.publishLocked(e.Payload, []string{identity})
				s.metrics.replayed.Inc()
			}
		}
	}
	for _, e := range s.replay {
		if -e.stanza > after && !e.handshake && addressed(e.to, identity) {
			s.publishLocked(e.payload, []string{identity})
			s.metrics.replayed.Inc()
		}
	}
	return true
}

func addressed(to []string, identity string) bool {
	return to == nil || slices.Contains(to, identity)
}

// Send numbers an envelope, logs it for replay and sends it to the given
// identities (everyone when none). Envelopes leave in stanza order.
func (s *Session) Send(body wire.Body, to ...string) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if len(to) == 0 {
		to = nil
	}
	s.sendLocked(body, to, nil, false)
}

// sendLocked logs and publishes an envelope. Unless handshake is set, it
// reaches only the addressees in sync; the others get it by replay.
func (s *Session) sendLocked(body wire.Body, to []string, meta map[string]any, handshake bool) int32 {
	stanza := -s.next
	s.next++
	env := &wire.Envelope{StanzaID: stanza, ConversationID: s.ID, Meta: meta, Body: body}
	payload, err := wire.Marshal(env)
	if err != nil {
		s.log.Error("encoding an envelope", "type", env.Type(), "err", err)
		return stanza
	}
	s.replay = append(s.replay, sent{stanza: stanza, payload: payload, to: to, handshake: handshake})
	s.replayBytes += len(payload)
	for len(s.replay) > replayMax || s.replayBytes > replayMaxBytes {
		s.replayBytes -= len(s.replay[0].payload)
		s.replay = s.replay[1:]
	}
	_, isStep := body.(*wire.ReasoningStep)
	partial := isStep && body.(*wire.ReasoningStep).Partial
	if !partial && !handshake {
		// Partial steps are transient: their final form is what lasts; so
		// are handshakes, which belong to one connection.
		s.store.SaveEnvelope(storage.Envelope{ConversationID: s.ID, StanzaID: stanza, Payload: payload, To: to, Reasoning: isStep, SentAt: time.Now()})
	}
	targets := to
	if !handshake {
		if targets = s.inSync(to); len(targets) == 0 {
			s.log.Debug("sent to nobody in sync", "stanza", stanza, "type", env.Type(), "to", to)
			return stanza
		}
	}
	s.publishLocked(payload, targets)
	return stanza
}

// inSync narrows addressees (nil: everyone) to the members in sync on
// the connection they synced on.
func (s *Session) inSync(to []string) []string {
	var out []string
	ok := func(id string) bool {
		conn := s.members[id]
		if conn == "" {
			return false
		}
		if conn == unannounced {
			if c := s.out.connection(id); c != "" {
				s.members[id] = c
			}
			return true
		}
		if s.out.connection(id) != conn {
			s.members[id] = "" // rejoined: wait for its handshake
			return false
		}
		return true
	}
	if to == nil {
		for id := range s.members {
			if ok(id) {
				out = append(out, id)
			}
		}
		return out
	}
	for _, id := range to {
		if ok(id) {
			out = append(out, id)
		}
	}
	return out
}

func (s *Session) publishLocked(payload []byte, to []string) {
	var err error
	if len(payload) > wire.MaxPacketBytes {
		err = s.out.publishStream(payload, to)
		s.metrics.streams.Inc()
	} else {
		err = s.out.publish(payload, to)
	}
	s.metrics.packetsOut.Inc()
	if err != nil {
		// The envelope is in the log: the client gets it on resume.
		s.metrics.sendFailures.Inc()
		s.log.Warn("sending to the room failed; the envelope waits in the replay log", "err", err)
	}
}

func errorBody(conv string, code int32, sev wire.Severity, recoverable bool, msg, originating string) *wire.ErrorMessage {
	return &wire.ErrorMessage{ID: wire.NewID("err"), ConversationID: conv, Code: code, Message: msg, Severity: sev,
		Recoverable: recoverable, OriginatingID: originating}
}

// sendError answers a sender with an ErrorMessage; the offending stanza
// travels in the envelope's meta as originatingStanzaId.
func (s *Session) sendError(to string, code int32, sev wire.Severity, recoverable bool, msg string, stanza int32, hasStanza bool, originating string) {
	var meta map[string]any
	if hasStanza {
		meta = map[string]any{"originatingStanzaId": stanza}
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.sendLocked(errorBody(s.ID, code, sev, recoverable, msg, originating), []string{to}, meta, true)
}

// Close stops the session and waits for every goroutine it owns, then
// releases the conversation.
func (s *Session) Close() {
	s.stop()
	s.wg.Wait()
	s.conv.Close()
}

// Done is closed when the session stops.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }
