package voice

import (
	"context"
	"time"

	"github.com/alicia-voice/alicia/pipeline/voice/echo"
	"github.com/alicia-voice/alicia/wire"
)

// NoiseFloor is the adaptive noise level in dBFS.
func (e *Endpointer) NoiseFloor() float64 { return dbfs(e.floor) }

// SpeakTurn hands the stage a turn as the engine's Speak does, for fakes
// that are not *pipeline.Turn.
func (s *Stage) SpeakTurn(t Turn) { s.speak(t) }

// State is the agent's state as last published, answered by Run's
// goroutine after everything handed to it before: a barrier.
func (s *Stage) State(ctx context.Context) State {
	st, _ := ask(ctx, s, func(l *loop) State { return l.state })
	return st
}

// Stop stops as a barge-in or a ControlStop of kind does, and returns once
// done.
func (s *Stage) Stop(ctx context.Context, kind wire.StopType) bool {
	_, ok := ask(ctx, s, func(l *loop) struct{} { l.stop(kind); return struct{}{} })
	return ok
}

// Hold keeps Run's goroutine busy until release is called: what is handed
// to the stage meanwhile waits behind it, in order.
func (s *Stage) Hold() (release func()) {
	held := make(chan struct{})
	s.post(func(*loop) { <-held })
	return func() { close(held) }
}

// PlayAhead is how far synthesis may run ahead of the listener.
const PlayAhead = playAhead

// Periodicity is how strongly two frames in a row repeat at a voice's
// pitch period; a frame has pitch from MinPeriodicity on.
func Periodicity(prev, cur []int16) float64 { return periodicity(prev, cur, false) }

const MinPeriodicity = minPeriodicity

// CueTone is the first n samples of the sound cue, at 24 kHz.
func CueTone(n int) []int16 { return (&pulse{}).next(n) }

// Ear hears a microphone as a listener does: through the suppressor s,
// then the endpointer e.
type Ear struct{ a *ear }

func NewEar(s *echo.Suppressor, e *Endpointer) Ear { return Ear{newEar(s, e)} }

// Hear takes a chunk that came at at and hands each frame's events to
// frame, with how late the suppressor put the frame out; rejected: a
// stretch of echo was taken out.
func (a Ear) Hear(pcm []int16, at time.Time, frame func(evs []EndpointEvent, late time.Duration)) (rejected bool, err error) {
	rejected, _, err = a.a.hear(pcm, at, func(_ []int16, evs []EndpointEvent, out time.Time) { frame(evs, at.Sub(out)) })
	return rejected, err
}
