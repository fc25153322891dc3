package voice

import (
	"context"
	"sync"
	"time"
)

// track is the stage's voice: the AudioOut only the stage writes to,
// pauses and clears. Between those changes what it holds plays at real
// time, so a wait for an amount of it to be played sleeps until then,
// or until the next change, whichever comes first: the stage waits on
// the audio played, never on a ticker.
type track struct {
	AudioOut

	mu     sync.Mutex
	paused bool
	// changed is closed at the next change and replaced; nil until
	// someone waits for one.
	changed chan struct{}
}

func newTrack(out AudioOut) *track {
	if out == nil {
		return nil
	}
	return &track{AudioOut: out}
}

// touch wakes the waiters: what the track holds changed.
func (t *track) touch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.wakeLocked()
}

// pause records a pause begun or ended, and wakes the waiters.
func (t *track) pause(paused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused = paused
	t.wakeLocked()
}

func (t *track) wakeLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

func (t *track) Write(samples []int16, rate int) error {
	err := t.AudioOut.Write(samples, rate)
	t.touch()
	return err
}

func (t *track) Pause() {
	t.AudioOut.Pause()
	t.pause(true)
}

func (t *track) Resume() {
	t.AudioOut.Resume()
	t.pause(false)
}

// Clear drops what is queued or held, and ends a pause.
func (t *track) Clear() {
	t.AudioOut.Clear()
	t.pause(false)
}

func (t *track) Keep(d time.Duration) {
	t.AudioOut.Keep(d)
	t.touch()
}

// next is closed at the track's next change, and tells whether it is
// paused now (nothing plays until it changes). Take it before reading
// the state a wait depends on, so that no change in between is missed.
func (t *track) next() (changed <-chan struct{}, paused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.changed, t.paused
}

// minWait is the least a wait for audio to play sleeps: the track sends
// in 20 ms frames on its own clock, so what is queued falls by steps,
// and a wait whose time came a little early looks again one frame on.
const minWait = FrameDuration

// wake is a timer for d from now, at least minWait; nil (never) when d
// is negative: nothing to wait for but a change.
func wake(d time.Duration) (<-chan time.Time, func() bool) {
	if d < 0 {
		return nil, func() bool { return false }
	}
	t := time.NewTimer(max(d, minWait))
	return t.C, t.Stop
}

// waitQueued waits until at most d is queued; false if ctx ended first.
func (t *track) waitQueued(ctx context.Context, d time.Duration) bool {
	for {
		changed, paused := t.next()
		q := t.Queued()
		if q <= d {
			return true
		}
		in := q - d
		if paused {
			in = -1
		}
		timer, stop := wake(in)
		select {
		case <-timer:
		case <-changed:
		case <-ctx.Done():
			stop()
			return false
		}
		stop()
	}
}
