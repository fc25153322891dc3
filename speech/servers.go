package speech

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/internal/failover"
	"github.com/alicia-voice/alicia/internal/provider"
)

// Default first-byte timeouts of speech servers, when another could serve
// instead. A recogniser opens a realtime session at once, and answers an
// upload once it has transcribed it, which takes up to about as long as
// the utterance on a CPU: an upload's limit is this plus the audio's
// length (see uploadFirstByte). A synthesiser streams a sentence's first
// audio within a second. A server still silent after that is failing the
// conversation anyway.
const (
	DefaultSTTFirstByte = 5 * time.Second
	DefaultTTSFirstByte = 5 * time.Second
)

// servers is the pool a recogniser or synthesiser serves from: the one
// ProviderConfig built, or, for one built by hand, a pool of one over
// its URL, built on first use.
type servers struct {
	once sync.Once
	pool *failover.Pool
}

func (s *servers) get(kind, url string, log *slog.Logger) *failover.Pool {
	s.once.Do(func() {
		if s.pool == nil {
			s.pool = failover.New(kind, []string{url}, failover.Config{Logger: log})
		}
	})
	return s.pool
}

// openBody waits, under the attempt's first-byte timeout (fctx), for the
// first byte of an answer whose headers came, and returns the body to
// read from. Failures before that byte are the server's (Down); once it
// came, what goes wrong is the stream's. An empty body came in time: what
// it lacks is for the caller to say.
func openBody(ctx, fctx context.Context, fb *failover.FirstByte, service string, body io.Reader) (*bufio.Reader, error) {
	br, err := fb.Open(body)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, beforeFirstByte(ctx, fctx, service, err)
	}
	return br, nil
}

// beforeFirstByte classifies a failure before the first byte: the caller
// cancelled, or the server failed (Down) by refusing, breaking off or
// staying silent past the first-byte timeout.
func beforeFirstByte(ctx, fctx context.Context, service string, err error) error {
	switch {
	case ctx.Err() != nil:
		return &provider.Error{Service: service, Kind: provider.ErrCancelled, Cause: ctx.Err()}
	case failover.TimedOut(fctx):
		return failover.Down(&provider.Error{Service: service, Kind: provider.ErrConnect, Message: failover.ErrNoFirstByte.Error(), Cause: err})
	}
	return failover.Down(&provider.Error{Service: service, Kind: provider.ErrConnect, Message: err.Error(), Cause: err})
}

// statusErr is an HTTP error status, Down when it is the server's fault.
func statusErr(e *provider.Error) error {
	if failover.StatusDown(e.Status) {
		return failover.Down(e)
	}
	return e
}
