package room

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/room/audio"
)

// preGate is a microphone's input while its pre-connect recording may
// come. It never blocks the SDK's media goroutine: live audio is held,
// not waited on.
type preGate struct {
	in     audio.Input
	key    preKey
	log    *slog.Logger
	detach func(*preGate)
	timer  *time.Timer

	// flagged: the client said it sends a recording of the track.
	flagged bool

	mu sync.Mutex
	// holding: live audio is kept in held until the recording comes or
	// the wait ends.
	holding bool
	held    [][]int16
	heldLen int
	// settled: the recording came or the wait ended; nothing more is
	// held or taken.
	settled bool
	closed  bool
}

// Write implements audio.Input.
func (g *preGate) Write(samples []int16) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.holding {
		return g.in.Write(samples)
	}
	if g.heldLen+len(samples) > preconnectMaxSeconds*voice.InputRate {
		return nil // a stalled recording must not grow memory
	}
	g.held = append(g.held, slices.Clone(samples))
	g.heldLen += len(samples)
	return nil
}

// Close implements audio.Input: the microphone is gone.
func (g *preGate) Close() error {
	g.mu.Lock()
	g.flushLocked()
	g.settled, g.closed = true, true
	g.mu.Unlock()
	g.timer.Stop()
	g.detach(g)
	return g.in.Close()
}

// expect holds the live audio from now on: the recording is being
// received.
func (g *preGate) expect() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.settled {
		g.holding = true
	}
}

// release lets the live audio through again, unless the client said a
// recording of this track comes: the one received was of another.
func (g *preGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.settled && !g.flagged {
		g.flushLocked()
	}
}

// deliver puts the recording before the live audio held, and lets the
// live audio through from then on.
func (g *preGate) deliver(audio []int16) {
	g.mu.Lock()
	if !g.settled {
		if len(audio) > 0 {
			_ = g.in.Write(audio)
		}
		g.flushLocked()
		g.settled = true
	}
	g.mu.Unlock()
	g.timer.Stop()
	g.detach(g)
}

// expire ends the wait: what was held goes to the stage, and a recording
// that comes later is dropped, since the live audio after it was heard.
func (g *preGate) expire() {
	g.mu.Lock()
	if !g.settled {
		if g.holding {
			g.log.Warn("voice: the pre-connect audio did not come in time", "identity", g.key.identity, "track", g.key.trackID)
		}
		g.flushLocked()
		g.settled = true
	}
	g.mu.Unlock()
	g.detach(g)
}

func (g *preGate) flushLocked() {
	if g.closed {
		return
	}
	for _, s := range g.held {
		_ = g.in.Write(s)
	}
	g.held, g.heldLen, g.holding = nil, 0, false
}
