package room

import (
	"time"

	"github.com/alicia-voice/alicia/pipeline/voice"
)

// showStateAgainAfter are the delays after a user arrives at which the
// agent's listening state is published again. components-react 2.9.20's
// useAgent reads the agent's state only from attribute changes that come
// after it subscribed, so a client whose page subscribed after the bot
// said "listening" waits for a change that never comes, and its session
// ends at 20 s ("did not complete initializing"). A client cannot be
// asked when it subscribed; two tries cover a page that mounts its
// session view late.
var showStateAgainAfter = []time.Duration{time.Second, 4 * time.Second}

// showStateAgain schedules those re-publications for a user who arrived,
// once per connection: a page reloaded under the same identity replaces
// its connection without a new arrival, and the SDK tells of it only by
// what changed, its attributes. Called on the run goroutine, which owns
// stateShown and whose session owns the timer.
func (s *Session) showStateAgain(identity string) {
	conn := s.out.connection(identity)
	if shown, ok := s.stateShown[identity]; ok && shown == conn {
		return
	}
	if s.stateShown == nil {
		s.stateShown = map[string]string{}
	}
	s.stateShown[identity] = conn
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var waited time.Duration
		for _, d := range showStateAgainAfter {
			t := time.NewTimer(d - waited)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			waited = d
			s.post(s.speech.showAgain)
		}
	}()
}

// showAgain makes "listening" a change again: the state steps back to
// initializing, which such a client showed anyway, and returns. Another
// state needs nothing: it changes to listening later, as a change. On
// the writer.
func (v *speech) showAgain() {
	if v.state != voice.StateListening || v.stale {
		return
	}
	if v.s.out.setAttributes(map[string]string{AgentStateAttribute: string(voice.StateInitializing)}) != nil {
		return
	}
	v.setState(voice.StateListening)
}
