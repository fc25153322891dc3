package room

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/wire"
)

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
