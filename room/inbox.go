package room

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// receive queues a packet from the room; the SDK's callback must not
// block, so a full inbox answers 504 instead.
func (s *Session) receive(from string, payload []byte) {
	if !s.enqueue(rawPacket{from: from, payload: payload, received: time.Now()}) {
		s.metrics.badInput.WithLabelValues("504").Inc()
		s.sendError(from, wire.NewError(s.ID, wire.CodeQueueFull, "too many envelopes at once; send this one again"))
	}
}

// arrived, left and attributesChanged queue a room event for identity.
// Events are never refused: a lost arrival or attribute change would
// leave a user unanswered, and they come at the pace people join and
// leave.
func (s *Session) arrived(identity string, attrs map[string]string) {
	s.enqueue(rawPacket{from: identity, event: eventArrived, attrs: attrs})
}

func (s *Session) left(identity string) { s.enqueue(rawPacket{from: identity, event: eventLeft}) }

func (s *Session) attributesChanged(identity string, attrs map[string]string) {
	s.enqueue(rawPacket{from: identity, event: eventAttributes, attrs: attrs})
}

// ChatTopic is the text-stream topic on which LiveKit's stock agent
// frontends (agent-starter-react, the client SDKs' agent helpers) send
// what their user types.
const ChatTopic = "lk.chat"

// chat queues a message typed into lk.chat; it is refused like a data
// packet when the inbox is full.
func (s *Session) chat(identity, text string) {
	if !s.enqueue(rawPacket{from: identity, event: eventChat, text: text, received: time.Now()}) {
		s.metrics.badInput.WithLabelValues("504").Inc()
	}
}

// enqueue adds p to the inbox unless it is a data packet and inboxMax
// are waiting.
func (s *Session) enqueue(p rawPacket) bool {
	limit := inboxMax
	if p.event != eventNone && p.event != eventChat {
		limit = 0
	}
	return s.inbox.Push(p, limit)
}

func (s *Session) run() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.inbox.Ready():
		}
		for _, p := range s.inbox.Take() {
			if s.ctx.Err() != nil {
				return
			}
			s.handle(p)
		}
	}
}

// handle applies one item of the inbox, in the order it came: a room
// event, or an envelope from a client, which is checked before the
// conversation sees it.
func (s *Session) handle(p rawPacket) {
	if s.handleEvent(p) {
		return
	}
	s.askAttributes(p.from)
	env, ok := s.decode(p)
	if !ok || !s.addressedHere(p.from, env) {
		return
	}
	if s.duplicate(p.from, env.StanzaID, p.payload) {
		// Handled already (a client re-sending after a reconnect): say so
		// again, do nothing twice.
		s.Send(&wire.Acknowledgement{ConversationID: s.ID, AcknowledgedStanzaID: env.StanzaID, AcknowledgedMessageID: bodyID(env), Notes: "duplicate"}, p.from)
		return
	}
	if waitsForCapabilities(env.Body) && !s.isKnown(p.from) {
		s.hold(p.from, pipeline.Inbound{From: p.from, StanzaID: env.StanzaID, Body: env.Body, Received: p.received}, bodyID(env))
		return
	}
	s.deliver(p, env)
}

// handleEvent applies p if it is a room event, and says whether it was;
// a data packet is left to handle.
func (s *Session) handleEvent(p rawPacket) bool {
	switch p.event {
	case eventArrived:
		delete(s.stateShown, p.from)
		s.showStateAgain(p.from)
		if synced := s.join(p.from); synced != "" {
			// It handshook before the bot heard of it: its Configuration
			// is newer than its token's attributes, and it was answered.
			s.recheck(p, synced)
			return true
		}
		s.applyAttributes(p.from, p.attrs, false)
		s.welcome(p.from)
	case eventLeft:
		delete(s.asked, p.from)
		s.leave(p.from)
	case eventAttributes:
		s.showStateAgain(p.from)
		s.applyAttributes(p.from, p.attrs, true)
	case eventChat:
		s.chatMessage(p)
	case eventAssume:
		// A grace that a Configuration ended meanwhile, or that a later
		// grace replaced, assumes nothing.
		if s.asking[p.from] == p.gen {
			delete(s.asking, p.from)
			s.assume(p.from)
		}
	default:
		return false
	}
	return true
}

// askAttributes reads, once, the attributes of a sender the bot was not
// told of yet. LiveKit can deliver a client's packets to the bot seconds
// before it announces the client (with its attributes): asking now makes
// them apply before this packet, which is newer.
func (s *Session) askAttributes(from string) {
	if s.isKnown(from) || s.asked[from] || s.out.connection(from) != "" {
		return
	}
	s.asked[from] = true
	ctx, cancel := context.WithTimeout(s.ctx, 3*time.Second)
	attrs, err := s.out.attributes(ctx, from)
	cancel()
	if err != nil {
		s.log.Warn("reading the attributes of a participant the bot was not told of yet", "identity", from, "err", err)
	} else {
		s.applyAttributes(from, attrs, false)
	}
}

// decode reads p's envelope. One that cannot be read is answered with a
// severe error, about its stanza when that much could be read, so that the
// client knows which of its envelopes was lost.
func (s *Session) decode(p rawPacket) (*wire.Envelope, bool) {
	env, err := wire.Unmarshal(p.payload)
	if err == nil {
		return env, true
	}
	var de *wire.DecodeError
	if !errors.As(err, &de) {
		de = &wire.DecodeError{Code: wire.CodeMalformed, Reason: err.Error()}
	}
	s.metrics.badInput.WithLabelValues(strconv.Itoa(int(de.Code))).Inc()
	s.log.Warn("bad envelope", "from", p.from, "err", err)
	e := wire.NewError(s.ID, de.Code, de.Error(), wire.Severe())
	if de.HasStanzaID {
		s.sendError(p.from, e, de.StanzaID)
	} else {
		s.sendError(p.from, e)
	}
	return nil, false
}

// addressedHere says whether env is a client's envelope for this
// conversation; one that is not is answered with a severe error.
func (s *Session) addressedHere(from string, env *wire.Envelope) bool {
	if env.StanzaID <= 0 {
		// A client numbers 1, 2, 3…: a zero or negative stanza claims to
		// come from a server.
		s.metrics.badInput.WithLabelValues("101").Inc()
		s.sendError(from, wire.NewError(s.ID, wire.CodeMalformed,
			fmt.Sprintf("stanza %d: clients number their envelopes 1, 2, 3…; negative stanzas are the server's", env.StanzaID), wire.Severe(), wire.About(bodyID(env))), env.StanzaID)
		return false
	}
	if env.ConversationID != "" && env.ConversationID != s.ID {
		s.metrics.badInput.WithLabelValues("201").Inc()
		s.sendError(from, wire.NewError(s.ID, wire.CodeConversationNotFound,
			fmt.Sprintf("this room is conversation %s, not %s", s.ID, env.ConversationID), wire.Severe(), wire.About(bodyID(env))), env.StanzaID)
		return false
	}
	return true
}

// deliver hands a checked envelope on: a Configuration to the handshake,
// anything else but an acknowledgement to the conversation.
func (s *Session) deliver(p rawPacket, env *wire.Envelope) {
	if _, isConfig := env.Body.(*wire.Configuration); !isConfig {
		// A client that talks without a handshake is in sync from now on.
		s.post(func() { s.sync(p.from) })
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
func withoutPreference(features wire.Features) wire.Features {
	features.ReasoningPreference = ""
	return features
}

// applyAttributes reads a participant's Alicia attributes: its features,
// and maybe a preference to set. A client whose capabilities become known
// this way is answered what it sent before; one already talking gets the
// server's Configuration again, stating what is in effect now.
func (s *Session) applyAttributes(identity string, attrs map[string]string, changed bool) {
	s.noteReader(identity, attrs)
	list, hasFeatures := attrs[AttrFeatures]
	pref, hasPref := attrs[AttrReasoningPreference]
	if !hasFeatures && !hasPref {
		return // not an Alicia client's attributes
	}
	s.ownerMu.Lock()
	features := s.features[identity]
	if hasFeatures {
		features = withoutPreference(wire.ParseFeatureList(list))
		s.features[identity] = features
		s.known[identity] = true
		s.announced(identity)
		s.claim(identity)
	}
	known := s.known[identity]
	s.ownerMu.Unlock()
	given := features
	if hasPref {
		given.ReasoningPreference = strings.TrimSpace(pref)
	}
	effective := s.conv.Configure(s.ctx, identity, given)
	if !known || !changed {
		return // the greeting that follows an arrival states it
	}
	reply := s.configuration(identity, effective)
	waiting := len(s.held[identity]) > 0
	s.post(func() {
		if s.members[identity] != "" || waiting {
			s.sync(identity)
			s.emit(reply, []string{identity}, nil, true)
		}
	})
	s.release(identity)
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

// chatMessage answers a message typed into lk.chat like a typed
// UserMessage. A client that never said what it can display is a stock
// LiveKit frontend: it plays the agent's voice and shows lk.transcription,
// and reads no Alicia envelope, so the answer is spoken to it.
// stockClient takes a user whose client never said what it can display,
// and types on lk.chat or speaks, for a stock LiveKit frontend: it hears
// the answers, and a conversation nobody claimed is its own. Under
// ownerMu.
func (s *Session) stockClient(identity string) {
	if !s.known[identity] {
		s.features[identity] = wire.Features{AudioOutput: true}
		s.known[identity] = true
		s.claim(identity)
	}
}

// listensTo: the voice listens to the user's microphone.
func (s *Session) listensTo(identity string) {
	s.ownerMu.Lock()
	s.stockClient(identity)
	s.ownerMu.Unlock()
}

func (s *Session) chatMessage(p rawPacket) {
	text := strings.TrimSpace(p.text)
	if text == "" {
		return
	}
	s.ownerMu.Lock()
	s.stockClient(p.from)
	s.present[p.from] = true
	s.ownerMu.Unlock()
	s.conv.Handle(s, pipeline.Inbound{From: p.from, Received: p.received,
		Body: &wire.UserMessage{ID: wire.NewID("msg"), ConversationID: s.ID, Content: text, Timestamp: p.received.UnixMilli()}})
}
