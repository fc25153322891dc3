package room

import (
	"time"

	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// Send queues an envelope for the given identities (everyone when none):
// the writer numbers it, logs it for replay and publishes it. Envelopes
// leave in the order of the calls. Send never blocks: the engine's
// Outbox.
func (s *Session) Send(body wire.Body, to ...string) {
	if len(to) == 0 {
		to = nil
	}
	s.post(func() { s.emit(body, to, nil, false) })
}

// post queues op for the writer goroutine, which owns the numbering, the
// members' sync state and the replay ring, and does the session's network
// and durable-log I/O with no lock held.
func (s *Session) post(op func()) { s.ops.Push(op, 0) }

// write runs the queued ops in order until quit, then what is left.
func (s *Session) write() {
	defer close(s.writerDone)
	for {
		select {
		case <-s.ops.Ready():
			s.runOps()
		case <-s.quit:
			s.runOps()
			return
		}
	}
}

func (s *Session) runOps() {
	for {
		ops := s.ops.Take()
		if len(ops) == 0 {
			return
		}
		for _, op := range ops {
			op()
		}
	}
}

// stanzaBlock is how many stanza numbers are reserved at once.
const stanzaBlock = 128

// number hands out the next stanza, reserving a block in the store first
// when the last one is used up. The reservation is synchronous: a bot
// taking the room over after a crash reserves after it and can never
// reuse a number this one sent.
func (s *Session) number() (int32, bool) {
	if !s.reserve() {
		return 0, false
	}
	n := s.next
	s.next++
	return -n, true
}

// reserve makes sure an unused reserved number is at hand.
func (s *Session) reserve() bool {
	if s.next < s.limit {
		return true
	}
	first, err := retry(s.wctx, s.log, "reserving stanza numbers", 0, func() (int32, error) {
		return s.store.ReserveStanzas(s.wctx, s.ID, stanzaBlock)
	})
	if err != nil {
		return false
	}
	s.next, s.limit = first, first+stanzaBlock
	return true
}

// emit numbers, logs and publishes an envelope, on the writer. Unless
// handshake is set, it reaches only the addressees in sync; the others
// get it by replay.
func (s *Session) emit(body wire.Body, to []string, meta map[string]any, handshake bool) {
	if payload, targets, ok := s.record(body, to, meta, handshake); ok {
		s.publish(payload, targets)
	}
}

// record numbers and logs an envelope, on the writer, and says whether
// it goes out now and to whom (see emit).
func (s *Session) record(body wire.Body, to []string, meta map[string]any, handshake bool) (payload []byte, targets []string, ok bool) {
	stanza, ok := s.number()
	if !ok {
		s.log.Error("dropping an envelope: no stanza number could be reserved", "type", (&wire.Envelope{Body: body}).Type())
		return nil, nil, false
	}
	env := &wire.Envelope{StanzaID: stanza, ConversationID: s.ID, Meta: meta, Body: body}
	payload, err := wire.Marshal(env)
	if err != nil {
		s.log.Error("encoding an envelope", "type", env.Type(), "err", err)
		return nil, nil, false
	}
	s.ring = append(s.ring, sent{stanza: stanza, payload: payload, to: to, handshake: handshake})
	s.ringBytes += len(payload)
	for len(s.ring) > replayMax || s.ringBytes > replayMaxBytes {
		s.ringBytes -= len(s.ring[0].payload)
		s.ring = s.ring[1:]
	}
	_, isStep := body.(*wire.ReasoningStep)
	partial := isStep && body.(*wire.ReasoningStep).Partial
	if !partial && !handshake {
		// Partial steps are transient: their final form is what lasts; so
		// are handshakes, which belong to one connection.
		s.store.SaveEnvelope(storage.Envelope{ConversationID: s.ID, StanzaID: stanza, Payload: payload, To: to, Reasoning: isStep, SentAt: time.Now()})
	}
	if handshake {
		return payload, to, true
	}
	targets = s.inSync(to)
	return payload, targets, len(targets) > 0
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

func (s *Session) publish(payload []byte, to []string) {
	if len(payload) > wire.MaxPacketBytes {
		s.metrics.streams.Inc()
		s.tally(s.out.publishStream(payload, to))
		return
	}
	s.tally(s.out.publish(payload, to))
}

// tally counts a packet that went out, or failed to.
func (s *Session) tally(err error) {
	s.metrics.packetsOut.Inc()
	if err != nil {
		// The envelope is in the log: the client gets it on resume.
		s.metrics.sendFailures.Inc()
		s.log.Warn("sending to the room failed; the envelope waits in the replay log", "err", err)
	}
}

// sendError answers a sender with an ErrorMessage, at once (as a
// handshake envelope, never replayed); the offending stanza, when there
// is one, travels in the envelope's meta.
func (s *Session) sendError(to string, e *wire.ErrorMessage, stanza ...int32) {
	var meta map[string]any
	if len(stanza) > 0 {
		meta = originating(stanza[0])
	}
	s.post(func() { s.emit(e, []string{to}, meta, true) })
}

// originating is the meta naming the client stanza an error answers.
func originating(stanza int32) map[string]any { return map[string]any{"originatingStanzaId": stanza} }
