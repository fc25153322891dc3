package room

import (
	"fmt"
	"slices"
	"time"

	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// configure answers a client's Configuration: reasoning preferences,
// resume, then the server's own Configuration.
func (s *Session) configure(from string, stanza int32, c *wire.Configuration) {
	s.ownerMu.Lock()
	if s.owner == "" {
		s.owner = from
		s.store.SaveConversation(storage.Conversation{ID: s.ID, Owner: from, CreatedAt: time.Now()})
	}
	s.features[from] = slices.Clone(c.Features)
	s.tools[from] = slices.Clone(c.Tools)
	s.ownerMu.Unlock()
	// What reasoning the user sees is the engine's to decide, from the
	// client's features.
	effective := s.conv.Configure(s.ctx, from, c.Features)
	reply := s.configuration(from, effective)
	s.post(func() {
		if c.LastSequenceSeen > 0 && !s.replay(from, c.LastSequenceSeen) {
			s.emit(errorBody(s.ID, wire.CodeInvalidState, wire.SeverityError, false,
				fmt.Sprintf("cannot resume after stanza -%d: the envelopes after it are no longer kept; start again", c.LastSequenceSeen), ""),
				[]string{from}, map[string]any{"originatingStanzaId": stanza}, true)
			return
		}
		s.sync(from)
		s.emit(reply, []string{from}, nil, true)
	})
}

// sync records the user's current connection as in sync; on the writer.
func (s *Session) sync(identity string) {
	conn := s.out.connection(identity)
	if conn == "" {
		// LiveKit delivered the client's packets before telling the bot
		// about the participant: the join event completes the sync.
		s.early[identity] = true
	}
	s.members[identity] = conn
}

// join records a user who entered the room: out of sync until its
// handshake, unless its handshake on this very connection came first
// (LiveKit may deliver a client's first packets before the event).
func (s *Session) join(identity string) {
	s.log.Debug("member joined", "identity", identity)
	s.ownerMu.Lock()
	s.present[identity] = true
	s.ownerMu.Unlock()
	s.post(func() {
		if s.early[identity] {
			delete(s.early, identity)
			s.members[identity] = s.out.connection(identity)
			return
		}
		s.unsyncUnlessCurrent(identity)
	})
}

// unsyncUnlessCurrent marks a user out of sync unless it synced on the
// connection it has now: an event about an older connection changes
// nothing for the newer one.
func (s *Session) unsyncUnlessCurrent(identity string) {
	if conn := s.members[identity]; conn == "" || conn != s.out.connection(identity) {
		s.members[identity] = ""
	}
}

// leave marks a user gone: out of sync, since the next connection under
// its identity may announce itself with no join event (a quick rejoin
// replaces the old connection).
func (s *Session) leave(identity string) {
	s.log.Debug("member left", "identity", identity)
	s.ownerMu.Lock()
	delete(s.present, identity)
	s.ownerMu.Unlock()
	s.post(func() {
		delete(s.early, identity)
		s.unsyncUnlessCurrent(identity)
	})
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
			answered := make(chan bool, 1)
			// Checked and sent on the writer: a greeting never follows the
			// reply to the user's Configuration.
			s.post(func() {
				done := s.members[identity] != "" || s.out.connection(identity) == ""
				if !done {
					s.emit(greeting, []string{identity}, nil, true)
				}
				answered <- done
			})
			select {
			case <-s.ctx.Done():
				return
			case done := <-answered:
				if done {
					return
				}
			}
		}
	}()
}

// greet sends the server's Configuration, unasked: to the room when the
// bot joins, to one participant when it joins later. Either side may
// speak first.
// A user whose handshake on its current connection is done already (its
// Configuration overtook the join event) is not greeted: a greeting never
// follows the reply to the user's Configuration.
func (s *Session) greet(identity string) {
	greeting := s.greeting(identity)
	s.post(func() {
		if conn := s.members[identity]; conn != "" && conn == s.out.connection(identity) {
			return
		}
		s.emit(greeting, []string{identity}, nil, true)
	})
}

// greeting is built before it is queued for the writer: the engine may
// read storage for it.
func (s *Session) greeting(identity string) *wire.Configuration {
	return s.configuration(identity, s.conv.Greeting(s.ctx, identity))
}

// replay re-sends the envelopes after stanza −after that were
// addressed to identity, exactly once each, with their original numbers
// and bytes: the older ones from the durable log, the recent ones from
// memory (the durable writer may lag). false means some are no longer
// kept anywhere. It runs on the writer.
func (s *Session) replay(identity string, after int32) bool {
	if !s.reserve() {
		return false
	}
	s.log.Debug("replay", "identity", identity, "after", after, "next", s.next, "kept", len(s.ring))
	switch {
	case after > s.next-1:
		return false // the client saw stanzas this session never sent: its state is gone
	case after == s.next-1:
		return true // nothing was missed
	}
	// Stanzas whose magnitude is at least oldest are in memory.
	oldest := s.next
	if len(s.ring) > 0 {
		oldest = -s.ring[0].stanza
	}
	if oldest > after+1 {
		if !s.store.Durable() {
			return false
		}
		envs, err := s.store.Envelopes(s.wctx, s.ID, after, identity)
		if err != nil {
			s.log.Error("reading the envelope log", "err", err)
			return false
		}
		for _, e := range envs {
			if -e.StanzaID < oldest {
				s.publish(e.Payload, []string{identity})
				s.metrics.replayed.Inc()
			}
		}
	}
	for _, e := range s.ring {
		if -e.stanza > after && !e.handshake && addressed(e.to, identity) {
			s.publish(e.payload, []string{identity})
			s.metrics.replayed.Inc()
		}
	}
	return true
}

func addressed(to []string, identity string) bool {
	return to == nil || slices.Contains(to, identity)
}
