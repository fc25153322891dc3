package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/internal/failover"
	"github.com/alicia-voice/alicia/internal/provider"
)

// httpBackend is what the HTTP backends share: one POST whose streamed
// body is read under an idle timeout. There is deliberately no
// whole-request timeout: a long answer is not a failure (the reference
// implementation cut every answer at 10 s).
type httpBackend struct {
	client *http.Client
	// baseURL is the server the model probes ask: the first one, or
	// in the copies probeServers makes, each in turn.
	baseURL string
	servers *failover.Pool
	apiKey  string
	idle    time.Duration
}

// probeServers makes a model probe ask the servers in the pool's order
// until one can say, so that with the first server down the answer comes
// from the next. The probe's own bound covers them all; the servers are
// not set aside for what it meets, since "cannot say" is also what a
// server that does not publish its template answers.
func (b *httpBackend) probeServers(probe func(ctx context.Context, b *httpBackend) int32) func(ctx context.Context) int32 {
	return func(ctx context.Context) int32 {
		for _, u := range b.servers.Order() {
			c := *b
			c.baseURL = u
			if v := probe(ctx, &c); v != thinkUnknown || ctx.Err() != nil {
				return v
			}
		}
		return thinkUnknown
	}
}

var errIdle = errors.New("idle timeout")

// stream is an open response body under an idle timer.
type stream struct {
	body   io.ReadCloser
	timer  *time.Timer
	idle   time.Duration
	ctx    context.Context
	parent context.Context
	// release ends ctx.
	release func()
}

func (s *stream) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if n > 0 {
		s.timer.Reset(s.idle)
	}
	return n, err
}

func (s *stream) close() {
	s.timer.Stop()
	s.release()
	_ = s.body.Close()
}

// failure classifies an error met while reading the body.
func (s *stream) failure(err error) *Error {
	return transportError(s.parent, s.ctx, err, ErrTruncated)
}

func transportError(parent, ctx context.Context, err error, otherwise ErrorKind) *Error {
	switch {
	case parent.Err() != nil:
		return &Error{Service: service, Kind: ErrCancelled, Message: context.Cause(parent).Error(), Cause: err}
	case errors.Is(context.Cause(ctx), errIdle):
		return &Error{Service: service, Kind: ErrIdle, Message: "no data for longer than the idle timeout", Cause: err}
	case failover.TimedOut(ctx):
		return &Error{Service: service, Kind: ErrIdle, Message: "no first byte within the first-byte timeout", Cause: err}
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return &Error{Service: service, Kind: otherwise, Message: msg, Cause: err}
}

// post sends body as JSON to the first server that answers it and
// returns the streaming response, or an *Error for a transport failure or
// an HTTP error status. A server that fails before the first byte of its
// body is set aside and the next one asked; once a body has begun, what
// goes wrong is the stream's (it would repeat what was delivered).
func (b *httpBackend) post(ctx context.Context, path string, body any, accept string) (*stream, *Error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, &Error{Service: service, Kind: ErrProtocol, Message: "encoding the request: " + err.Error()}
	}
	var s *stream
	err = b.servers.Do(ctx, func(ctx context.Context, a failover.Attempt) error {
		var e *Error
		if s, e = b.postTo(ctx, a, path, payload, accept); e != nil {
			if serverDown(e) {
				return failover.Down(e)
			}
			return e
		}
		return nil
	})
	if err == nil {
		return s, nil
	}
	if e, ok := AsError(err); ok {
		return nil, e
	}
	return nil, &Error{Service: service, Kind: ErrConnect, Message: err.Error(), Cause: err}
}

// serverDown reports whether e, a failure before the first byte, is the
// server's, so that another server may serve the request.
func serverDown(e *Error) bool {
	switch e.Kind {
	case ErrConnect, ErrIdle, ErrTruncated:
		return true
	case ErrHTTP:
		return failover.StatusDown(e.Status)
	}
	return false
}

// postTo asks one server, and returns once the first byte of the body
// has come: until then a.FirstByte bounds the wait (or the idle timeout,
// if it is sooner or the attempt has no bound of its own), then the idle
// timeout does.
func (b *httpBackend) postTo(ctx context.Context, a failover.Attempt, path string, payload []byte, accept string) (*stream, *Error) {
	idleFirst := a.FirstByte <= 0 || a.FirstByte > b.idle
	if idleFirst {
		a.FirstByte = b.idle
	}
	fctx, fb := failover.Watch(ctx, a)
	// The idle timer is the stream's, from its first byte on; the wait
	// for that byte is fb's.
	sctx, cancel := context.WithCancelCause(fctx)
	release := func() {
		cancel(nil)
		fb.Release()
	}
	// failed says why the server sent no first byte: the first-byte
	// timeout is the idle timeout when that bounded the wait.
	failed := func(err error, otherwise ErrorKind) *Error {
		if idleFirst && failover.TimedOut(fctx) && ctx.Err() == nil {
			return &Error{Service: service, Kind: ErrIdle, Message: "no data for longer than the idle timeout", Cause: err}
		}
		return transportError(ctx, sctx, err, otherwise)
	}
	opened := false
	defer func() {
		if !opened {
			release()
		}
	}()
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, strings.TrimSuffix(a.Server, "/")+path, bytes.NewReader(payload))
	if err != nil {
		return nil, &Error{Service: service, Kind: ErrConnect, Message: err.Error(), Cause: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if b.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.apiKey)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, failed(err, ErrConnect)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, provider.HTTPError(service, resp.StatusCode, raw)
	}
	br, err := fb.Open(resp.Body)
	if err != nil {
		_ = resp.Body.Close()
		switch {
		case errors.Is(err, io.EOF):
			return nil, &Error{Service: service, Kind: ErrTruncated, Message: "the response had no body", Cause: err}
		case errors.Is(err, failover.ErrNoFirstByte):
			// The time ran out as the byte came: the context is gone.
			return nil, failed(context.Cause(fctx), ErrConnect)
		}
		return nil, failed(err, ErrTruncated)
	}
	opened = true
	s := &stream{body: readCloser{br, resp.Body}, idle: b.idle, ctx: sctx, parent: ctx, release: release}
	s.timer = time.AfterFunc(b.idle, func() { cancel(errIdle) })
	return s, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// runStream is what every backend's Stream shares: post, read frames into
// the turn with read, deliver events as they come, and end with exactly
// one finish or error. read returns nil once it called t.finish (or when
// drain reports that the consumer stopped), an *Error otherwise.
func runStream(yield func(Event) bool, t *turn, post func() (*stream, *Error), read func(s *stream, drain func() bool) *Error) {
	s, err := post()
	if err == nil {
		defer s.close()
		more := true
		drain := func() bool {
			more = more && t.drain(yield)
			return more
		}
		err = read(s, drain)
		if !more {
			return
		}
	}
	if err != nil {
		t.fail(err)
	}
	t.drain(yield)
}
