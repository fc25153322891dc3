package failover

import (
	"bufio"
	"context"
	"errors"
	"io"
	"time"
)

// ErrNoFirstByte is the cause of an attempt's context when the server
// sent nothing within Config.FirstByte.
var ErrNoFirstByte = errors.New("no first byte within the first-byte timeout")

// FirstByte bounds the wait for a response's first byte: its context is
// cancelled with ErrNoFirstByte unless Arrived comes within the attempt's
// FirstByte. Release it once the response is done with.
type FirstByte struct {
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

// Watch starts the wait for a's first byte; the returned context is the
// one to ask the server under.
func Watch(ctx context.Context, a Attempt) (context.Context, *FirstByte) {
	wctx, cancel := context.WithCancelCause(ctx)
	f := &FirstByte{cancel: cancel}
	if a.FirstByte > 0 {
		f.timer = time.AfterFunc(a.FirstByte, func() { cancel(ErrNoFirstByte) })
	}
	return wctx, f
}

// Arrived stops the wait; it reports false if the time was already up.
// The context's cause is ErrNoFirstByte by then, even if the timer's
// own cancellation has not run yet, so that TimedOut can be asked at
// once.
func (f *FirstByte) Arrived() bool {
	if f.timer == nil || f.timer.Stop() {
		return true
	}
	f.cancel(ErrNoFirstByte)
	return false
}

// Open waits for the first byte of body, a response whose headers came,
// and returns the body to read from, that byte included. The error is
// the read's (io.EOF for an empty body, which did arrive in time), or
// ErrNoFirstByte when the byte came after the time was up: the context is
// gone by then, and the rest of the body with it.
func (f *FirstByte) Open(body io.Reader) (*bufio.Reader, error) {
	br := bufio.NewReader(body)
	_, err := br.Peek(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if !f.Arrived() {
		return nil, ErrNoFirstByte
	}
	return br, err
}

// Release ends the context Watch returned.
func (f *FirstByte) Release() {
	if f.timer != nil {
		f.timer.Stop()
	}
	f.cancel(nil)
}

// TimedOut reports whether ctx (from Watch) ended for want of a first
// byte, rather than by its parent's cancellation.
func TimedOut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrNoFirstByte)
}
