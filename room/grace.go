package room

import (
	"time"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/wire"
)

// A client that talks before it said what it can display is given a
// grace: what it sends is kept, it is asked for its Configuration, and at
// the grace's end it is served with the deployment's assumed features.

// hold keeps an envelope from a client that has not said what it can
// display, instead of answering it as a client that can display nothing,
// and asks the client, once per grace, for its Configuration.
func (s *Session) hold(from string, in pipeline.Inbound, id string) {
	if len(s.held[from]) >= heldMax {
		s.metrics.badInput.WithLabelValues("504").Inc()
		s.sendError(from, wire.NewError(s.ID, wire.CodeQueueFull,
			"too many messages waiting for this client's Configuration; send a Configuration, then this message again", wire.About(id)), in.StanzaID)
		return
	}
	s.held[from] = append(s.held[from], in)
	// A client that talks is in the room, even before LiveKit announces
	// it: assume serves only users who are present.
	s.ownerMu.Lock()
	s.present[from] = true
	s.ownerMu.Unlock()
	// Asked once per grace, not once per kept list: what a device that
	// left had kept is still there when the next device under the same
	// identity talks, and that one must be asked for its own
	// Configuration.
	if _, running := s.asking[from]; !running {
		s.log.Info("message before the client's Configuration; kept until it comes", "identity", from)
		s.sendError(from, wire.NewError(s.ID, wire.CodeInvalidState,
			"waiting for this client's Configuration: send one (or set the participant attribute "+AttrFeatures+
				") saying what it can display; this message is kept and answered then", wire.About(id)), in.StanzaID)
		s.startGrace(from)
	}
}

// startGrace gives a client that talks before saying what it can display
// assumeAfter to answer the greeting and the 202: some clients send their
// Configuration once, when they connect, which reaches nobody before the
// bot is in the room, and understand neither. At its end the inbox is
// told, so that the assumption is made in order with what the client
// sends.
func (s *Session) startGrace(identity string) {
	s.askingGen++
	gen := s.askingGen
	s.asking[identity] = gen
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(s.assumeAfter)
		defer t.Stop()
		select {
		case <-s.ctx.Done():
		case <-t.C:
			s.enqueue(rawPacket{from: identity, event: eventAssume, gen: gen})
		}
	}()
}

// assume serves a client whose grace ended with messages held and no
// Configuration as one that announced the deployment's assumed features,
// with its user's stored preference, and says so in a Configuration
// listing what was assumed. A Configuration or features attribute that
// comes later replaces the assumption like any settings update.
//
// A user who left is not served: its kept messages wait for the next
// device under its identity, which is asked for its own Configuration
// when it talks.
func (s *Session) assume(identity string) {
	if len(s.held[identity]) == 0 {
		return
	}
	s.ownerMu.Lock()
	if s.known[identity] || !s.present[identity] {
		s.ownerMu.Unlock()
		return
	}
	features := s.assumedFeatures
	s.claim(identity)
	s.features[identity] = features
	s.known[identity] = true
	s.assumed[identity] = true
	s.ownerMu.Unlock()
	s.log.Info("no Configuration from the client after the greeting and the 202; serving it with the assumed features",
		"identity", identity, "features", features.List(), "after", s.assumeAfter)
	reply := s.assumedConfiguration(identity, s.conv.Configure(s.ctx, identity, features))
	s.post(func() {
		s.sync(identity)
		s.emit(reply, []string{identity}, nil, true)
	})
	s.release(identity)
}

// announced records that a client said what it can display itself: what
// was assumed for it no longer holds, and its grace is over. Called on
// the run goroutine, with ownerMu held.
func (s *Session) announced(identity string) {
	delete(s.assumed, identity)
	delete(s.asking, identity)
}

// release hands the engine what a now configured client sent before, in
// order, after whatever the writer has queued for the client so far.
func (s *Session) release(identity string) {
	held := s.held[identity]
	if len(held) == 0 {
		return
	}
	delete(s.held, identity)
	s.post(func() { s.sync(identity) })
	for _, in := range held {
		s.conv.Handle(s, in)
	}
}
