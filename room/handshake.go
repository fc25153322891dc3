package room

import (
	"fmt"
	"slices"
	"time"

	"github.com/alicia-voice/alicia/wire"
)

// configure answers a client's Configuration: reasoning preferences,
// resume, then the server's own Configuration.
func (s *Session) configure(from string, stanza int32, c *wire.Configuration) {
	features := wire.ParseFeatures(c.Features)
	s.ownerMu.Lock()
	s.claim(from)
	s.features[from] = withoutPreference(features)
	s.tools[from] = slices.Clone(c.Tools)
	s.known[from] = true
	s.announced(from)
	s.ownerMu.Unlock()
	// What reasoning the user sees is the engine's to decide, from the
	// client's features.
	effective := s.conv.Configure(s.ctx, from, features)
	reply := s.configuration(from, effective)
	s.post(func() {
		if c.LastSequenceSeen > 0 && !s.replay(from, c.LastSequenceSeen) {
			s.emit(wire.NewError(s.ID, wire.CodeInvalidState,
				fmt.Sprintf("cannot resume after stanza -%d: the envelopes after it are no longer kept; start again", c.LastSequenceSeen), wire.Unrecoverable()),
				[]string{from}, originating(stanza), true)
			return
		}
		s.sync(from)
		s.emit(reply, []string{from}, nil, true)
	})
	s.release(from)
}

// unannounced stands for the connection of a user in sync whose
// participant the bot's room does not list yet: LiveKit can deliver a
// client's packets to the bot seconds before it announces the client.
const unannounced = "?"

// sync records the user's current connection as in sync, on the writer;
// the user is in the room, whether or not the bot was told yet.
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
// was told it had joined. It returns the connection the user is in sync
// on, "" if none.
func (s *Session) join(identity string) string {
	s.log.Debug("member joined", "identity", identity)
	s.ownerMu.Lock()
	s.present[identity] = true
	s.ownerMu.Unlock()
	inSync := make(chan string, 1)
	s.post(func() {
		if m := s.members[identity]; m == unannounced || (m != "" && m == s.out.connection(identity)) {
			s.sync(identity)
		} else {
			s.members[identity] = ""
		}
		inSync <- s.members[identity]
	})
	select {
	case conn := <-inSync:
		return conn
	case <-s.ctx.Done():
		return ""
	}
}

// recheck looks again, once LiveKit's batched participant updates have
// come, at a user whose arrival found it in sync on connection synced,
// and announces it once more if its connection changed meanwhile with no
// handshake on the new one: then it is greeted. After its own
// reconnection the bot's SDK may list a user under the connection it had
// before, which the arrival then takes for the one in sync, and change
// it to the new one later without an event (a client that came back
// after a LiveKit restart waited for its greeting in vain).
func (s *Session) recheck(arrival rawPacket, synced string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(batchedUpdates)
		defer t.Stop()
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		moved := make(chan bool, 1)
		s.post(func() {
			// Out of sync ("") once a send found the connection changed;
			// another connection once a handshake came on it.
			m, c := s.members[arrival.from], s.out.connection(arrival.from)
			moved <- c != "" && c != synced && (m == synced || m == "")
		})
		select {
		case <-s.ctx.Done():
			return
		case m := <-moved:
			if !m {
				return
			}
		}
		// The new connection's attributes, not those the arrival had.
		if attrs, err := s.out.attributes(s.ctx, arrival.from); err == nil {
			arrival.attrs = attrs
		}
		s.enqueue(arrival)
	}()
}

// batchedUpdates is how long LiveKit may take to tell the room of a
// participant that publishes no track (its batched updates come every 3
// s), with a second to spare.
var batchedUpdates = 4 * time.Second

// leave marks a user gone: out of sync, since the next connection under
// its identity may announce itself with no join event (a quick rejoin
// replaces the old connection). It runs on the run goroutine.
func (s *Session) leave(identity string) {
	s.log.Debug("member left", "identity", identity)
	s.ownerMu.Lock()
	delete(s.present, identity)
	// The next connection under this identity may be another device:
	// it says what it can display again.
	delete(s.known, identity)
	delete(s.assumed, identity)
	s.ownerMu.Unlock()
	// Its grace ends with it: the timer's end is ignored, and the next
	// device under this identity that talks is asked, and given its own
	// grace. Called on the run goroutine, which owns asking.
	delete(s.asking, identity)
	s.post(func() { s.members[identity] = "" })
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

// assumedConfiguration is the server's Configuration to a client served
// with assumed features: what is in effect, marked as assumed, and each
// feature assumed, for a client to see what it was taken for.
func (s *Session) assumedConfiguration(identity string, reasoningFeatures []string) *wire.Configuration {
	c := s.configuration(identity, reasoningFeatures)
	c.Features = append(c.Features, wire.FeatureAssumedConfiguration)
	for _, f := range s.assumedFeatures.List() {
		c.Features = append(c.Features, wire.FeatureChoice(wire.FeatureAssumed, f))
	}
	return c
}

// greetAgain re-sends the greeting to a user who has not answered it: a
// greeting sent the instant a user joins can beat the user's data channel
// and be lost, and the handshake must not depend on who came first. The
// first repeat (1 s) falls within the grace of a client that talks
// before its Configuration (defaultAssumeAfter); the last (4 s after the
// greeting) is for a client that missed both, and may come after that
// grace: a client served with assumed features by then is in sync, and
// not greeted again.
var greetAgain = []time.Duration{time.Second, 3 * time.Second}

// greetQuickly: how often a greeting that went through LiveKit's API is
// repeated that way while the bot's own channel is not open. LiveKit drops
// what its API sends to a user whose data channel is not open yet, which
// a user that just joined may well be; a lost greeting costs its user
// this long, not the second of the first scheduled repeat.
var greetQuickly = 100 * time.Millisecond

// welcome greets a user who joined, and greets again until the user's
// Configuration arrives. Either side may speak first.
func (s *Session) welcome(identity string) {
	greeting := s.greeting(identity)
	sent := make(chan struct{})
	var again <-chan struct{}
	s.post(func() {
		again = s.greet(greeting, identity)
		close(sent)
	})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// The retries count from when the greeting went out: the bot's
		// first packet in a room can wait a second for its publishing
		// connection, and a greeting held there is late, not lost.
		select {
		case <-s.ctx.Done():
			return
		case <-sent:
		}
		delays := greetAgain
		if again != nil {
			// Repeated through the API until the bot's channel is open,
			// then once over it, which LiveKit holds for a user not ready
			// for it, and which cannot be lost; at the first scheduled
			// repeat at the latest. The same greeting: building one may
			// read and write storage.
			first := time.NewTimer(greetAgain[0])
			defer first.Stop()
			for late := false; again != nil && !late; {
				quickly := time.NewTimer(greetQuickly)
				select {
				case <-s.ctx.Done():
					quickly.Stop()
					return
				case <-again:
				case <-first.C:
					late = true
				case <-quickly.C:
				}
				quickly.Stop()
				var done bool
				if again, done = s.regreet(identity, greeting); done {
					return
				}
			}
			delays = greetAgain[1:]
		}
		for _, d := range delays {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(d):
			}
			if _, done := s.regreet(identity, s.greeting(identity)); done {
				return
			}
		}
	}()
}

// greet numbers a greeting and sends it to identity the way greetings go
// (conn.greet), on the writer. again is conn.greet's.
func (s *Session) greet(greeting *wire.Configuration, identity string) (again <-chan struct{}) {
	payload, to, ok := s.record(greeting, []string{identity}, nil, true)
	if !ok {
		return nil
	}
	again, err := s.out.greet(payload, to)
	s.tally(err)
	return again
}

// regreet sends greeting to identity again unless its Configuration came
// or it left, and says whether either is so; again is conn.greet's.
func (s *Session) regreet(identity string, greeting *wire.Configuration) (again <-chan struct{}, done bool) {
	type result struct {
		again <-chan struct{}
		done  bool
	}
	res := make(chan result, 1)
	// Checked and sent on the writer: a greeting never follows the reply
	// to the user's Configuration.
	s.post(func() {
		if s.members[identity] != "" || s.out.connection(identity) == "" {
			res <- result{done: true}
			return
		}
		res <- result{again: s.greet(greeting, identity)}
	})
	select {
	case <-s.ctx.Done():
		return nil, true
	case r := <-res:
		return r.again, r.done
	}
}

// greeting is built before it is queued for the writer: the engine may
// read storage for it. It tells a client whose capabilities are unknown
// that its Configuration is awaited.
func (s *Session) greeting(identity string) *wire.Configuration {
	s.ownerMu.Lock()
	known, features, assumed := s.known[identity], s.features[identity], s.assumed[identity]
	s.ownerMu.Unlock()
	if assumed {
		return s.assumedConfiguration(identity, s.conv.Configure(s.ctx, identity, features))
	}
	if known {
		return s.configuration(identity, s.conv.Configure(s.ctx, identity, features))
	}
	return s.configuration(identity, append(s.conv.Greeting(s.ctx, identity), wire.FeatureAwaitingConfiguration))
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
