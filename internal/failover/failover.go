// Package failover spreads one kind of request (model, recognition,
// synthesis) over an ordered list of servers: the first server that is
// not cooling off serves; one that fails before its first byte is set
// aside for a while and the next is tried within the same request.
//
// What counts as "before the first byte" is the caller's to say, because
// only the caller knows when output reached its consumer: an attempt
// returns Down(err) for a failure that may be retried elsewhere, and any
// other error once bytes have flowed, since sending the request again
// would repeat what was already delivered.
package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultCoolOff    = 30 * time.Second
	DefaultMaxCoolOff = 5 * time.Minute
)

// Config tunes a Pool.
type Config struct {
	// FirstByte is how long a server may take to send its first byte
	// before the next one is tried; 0 means no limit of its own. The last
	// server a request tries is never held to it: with nowhere else to
	// go, waiting for a slow answer beats giving up on it.
	FirstByte time.Duration
	// CoolOff is how long a failed server is skipped; it doubles with
	// each failure in a row, up to MaxCoolOff.
	CoolOff, MaxCoolOff time.Duration
	Logger              *slog.Logger
}

// Down marks err as a failure of the server before its first byte: the
// server is set aside and the request goes to the next one.
func Down(err error) error {
	if err == nil {
		return nil
	}
	return &downError{err}
}

type downError struct{ err error }

func (d *downError) Error() string { return d.err.Error() }
func (d *downError) Unwrap() error { return d.err }

// Outage is the error of a request that every server failed: all of the
// kind are down. Epoch numbers outages of a pool, so that whoever tells
// people about one tells them once.
type Outage struct {
	Kind  string
	Epoch uint64
	// Err is the last server's failure.
	Err error
}

func (o *Outage) Error() string {
	return fmt.Sprintf("every %s server is down; the last: %v", o.Kind, o.Err)
}
func (o *Outage) Unwrap() error { return o.Err }

// StatusDown reports whether an HTTP error status is the server's
// failure rather than the request's: 5xx, and the statuses that say the
// server is busy, misconfigured or not serving this model (401, 403, 404,
// 408, 429). A malformed or oversized request (400, 413, 422) would fail
// on every server alike.
func StatusDown(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

// Split reads a comma-separated list of servers, dropping blanks.
func Split(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Pool is the ordered servers of one kind and what is known of each. It
// is safe for concurrent use; no lock is held while a server is asked.
type Pool struct {
	kind string
	cfg  Config
	now  func() time.Time

	mu      sync.Mutex
	servers []server
	serving int // index of the server that last served; -1 before any
	out     bool
	epoch   uint64
}

type server struct {
	url      string
	shown    string // url without credentials, for logs and /readyz
	until    time.Time
	failedAt time.Time
	failures int // in a row
	reason   string
	// marks counts the failures that set the server aside. An attempt
	// notes it when it starts: if it has moved by the time the attempt
	// fails, a request that was in flight alongside has already counted
	// this breakdown, and counting it again would stretch a short blip
	// into a long cool-off (twenty turns in flight during a restart are
	// one failure, not twenty).
	marks uint64
}

// New builds the pool of kind ("llm", "stt", "tts") over urls, in order
// of preference.
func New(kind string, urls []string, cfg Config) *Pool {
	if cfg.CoolOff <= 0 {
		cfg.CoolOff = DefaultCoolOff
	}
	if cfg.MaxCoolOff < cfg.CoolOff {
		cfg.MaxCoolOff = max(cfg.CoolOff, DefaultMaxCoolOff)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Pool{kind: kind, cfg: cfg, now: time.Now, serving: -1}
	for _, u := range urls {
		p.servers = append(p.servers, server{url: u, shown: redact(u)})
	}
	return p
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}

// Served is what serves from a pool: the model clients, recognisers and
// synthesisers, for /readyz to report on.
type Served interface {
	Servers() *Pool
}

// Kind is what the pool's servers serve.
func (p *Pool) Kind() string { return p.kind }

// First is the most preferred server.
func (p *Pool) First() string {
	if len(p.servers) == 0 {
		return ""
	}
	return p.servers[0].url
}

// Order is every server, in the order to ask them now: those not
// cooling off in preference order, then the others, the one that failed
// longest ago first. For side requests that are not worth setting a
// server aside for, such as asking what model a server serves.
func (p *Pool) Order() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	var up, down []server
	for _, s := range p.servers {
		if now.Before(s.until) {
			down = append(down, s)
		} else {
			up = append(up, s)
		}
	}
	slices.SortStableFunc(down, func(a, b server) int { return a.failedAt.Compare(b.failedAt) })
	out := make([]string, 0, len(p.servers))
	for _, s := range append(up, down...) {
		out = append(out, s.url)
	}
	return out
}

// Attempt is one server to ask.
type Attempt struct {
	Server string
	// FirstByte bounds the wait for the server's first byte; 0: no
	// bound of its own (the request's last chance).
	FirstByte time.Duration
}

// Do asks the servers in turn until try succeeds or fails with an error
// not marked Down, and returns that. When every server it tried failed
// Down, all are down and the error is an *Outage.
//
// The servers tried are those not cooling off, in order, then the one
// that failed longest ago even if it is cooling off: a request is never
// refused outright, and during an outage each request probes one server
// instead of waiting on every one of them.
func (p *Pool) Do(ctx context.Context, try func(ctx context.Context, a Attempt) error) error {
	order := p.candidates()
	var last error
	for i, c := range order {
		idx := c.idx
		a := Attempt{Server: p.servers[idx].url, FirstByte: p.cfg.FirstByte}
		if i == len(order)-1 {
			a.FirstByte = 0
		}
		err := try(ctx, a)
		var d *downError
		if !errors.As(err, &d) {
			if ctx.Err() == nil {
				p.served(idx)
			}
			return err
		}
		if ctx.Err() != nil {
			// The caller gave up; the server is not to blame.
			return d.err
		}
		last = d.err
		p.failed(c, d.err)
	}
	// Every server this request tried failed, and the others were down
	// already: an outage, which lasts until one serves again.
	p.mu.Lock()
	begins := !p.out
	if begins {
		p.out = true
		p.epoch++
	}
	o := &Outage{Kind: p.kind, Epoch: p.epoch, Err: last}
	p.mu.Unlock()
	if begins {
		p.cfg.Logger.Error("failover: every server is down", "kind", p.kind)
	}
	return o
}

// candidate is a server to try: its index, and its marks when the
// request chose it.
type candidate struct {
	idx   int
	marks uint64
}

// candidates lists the servers to try now.
func (p *Pool) candidates() []candidate {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	var order []candidate
	oldest := -1
	for i, s := range p.servers {
		if !now.Before(s.until) {
			order = append(order, candidate{i, s.marks})
			continue
		}
		if oldest < 0 || s.failedAt.Before(p.servers[oldest].failedAt) {
			oldest = i
		}
	}
	if oldest >= 0 {
		order = append(order, candidate{oldest, p.servers[oldest].marks})
	}
	return order
}

func (p *Pool) served(idx int) {
	p.mu.Lock()
	s := &p.servers[idx]
	prev := p.serving
	recovered := p.out
	wasDown := s.failures > 0
	s.failures, s.until, s.reason = 0, time.Time{}, ""
	p.serving, p.out = idx, false
	var reason string
	switch {
	case prev == idx:
	case prev >= 0 && idx < prev:
		reason = "a preferred server is back"
	case prev >= 0 && p.servers[prev].failures > 0:
		reason = p.servers[prev].shown + " is down: " + p.servers[prev].reason
	default:
		reason = "first request"
		for _, o := range p.servers[:idx] {
			if o.failures > 0 {
				reason = o.shown + " is down: " + o.reason
				break
			}
		}
	}
	shown := s.shown
	p.mu.Unlock()
	log := p.cfg.Logger
	if recovered {
		log.Info("failover: a server is back after every one was down", "kind", p.kind, "server", shown)
	}
	if reason != "" {
		log.Info("failover: serving from a new server", "kind", p.kind, "server", shown, "reason", reason, "was_down", wasDown)
	}
}

// failed sets the server c aside, unless a request that was asking it at
// the same time already did: then only the reason is news.
func (p *Pool) failed(c candidate, err error) {
	p.mu.Lock()
	now := p.now()
	s := &p.servers[c.idx]
	s.reason = err.Error()
	if s.marks != c.marks {
		p.mu.Unlock()
		return
	}
	s.marks++
	s.failures++
	cool := p.cfg.CoolOff
	for i := 1; i < s.failures && cool < p.cfg.MaxCoolOff; i++ {
		cool *= 2
	}
	cool = min(cool, p.cfg.MaxCoolOff)
	s.until, s.failedAt = now.Add(cool), now
	shown, n := s.shown, s.failures
	p.mu.Unlock()
	p.cfg.Logger.Warn("failover: server down", "kind", p.kind, "server", shown, "err", err, "cool_off", cool, "failures_in_a_row", n)
}
