package failover

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
)

// get is an attempt as the HTTP clients make one: a refused connection,
// an error status or no first byte within the attempt's bound is Down;
// a body that breaks off after its first byte is not.
func get(body *string) func(ctx context.Context, a Attempt) error {
	return func(ctx context.Context, a Attempt) error {
		fctx, fb := Watch(ctx, a)
		defer fb.Release()
		req, _ := http.NewRequestWithContext(fctx, http.MethodGet, a.Server, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return Down(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err := errors.New(resp.Status)
			if StatusDown(resp.StatusCode) {
				return Down(err)
			}
			return err
		}
		br, err := fb.Open(resp.Body)
		if err != nil {
			return Down(errors.Join(err, context.Cause(fctx)))
		}
		b, err := io.ReadAll(br)
		*body = string(b)
		return err
	}
}

type counted struct {
	*httptest.Server
	hits atomic.Int32
}

func serve(t *testing.T, h http.HandlerFunc) *counted {
	c := &counted{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newPool(urls []string, cfg Config) (*Pool, *clock, *bytes.Buffer) {
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	p := New("llm", urls, cfg)
	c := &clock{t: time.Unix(1_000_000, 0)}
	p.now = c.now
	return p, c, &logs
}

// A refused connection and an error status each set their server aside
// for the cool-off, within the same request; the next requests go
// straight to the server that answered until the cool-off is over, and a
// server that fails again is skipped twice as long.
func TestRefusedAndErroringServersAreSkipped(t *testing.T) {
	failing := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	})
	good := serve(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "answer") })
	refused := testenv.ClosedURL(t)
	p, clk, logs := newPool([]string{refused, failing.URL, good.URL}, Config{CoolOff: 30 * time.Second})
	ctx := context.Background()

	var body string
	if err := p.Do(ctx, get(&body)); err != nil || body != "answer" {
		t.Fatalf("first request: %q, %v", body, err)
	}
	if failing.hits.Load() != 1 || good.hits.Load() != 1 {
		t.Fatalf("hits: failing %d, good %d", failing.hits.Load(), good.hits.Load())
	}
	st := p.Status()
	if st.Serving != good.URL || st.Servers[0].State != "down" || st.Servers[1].State != "down" || st.Servers[2].State != "serving" ||
		!strings.Contains(st.Servers[1].Error, "503") {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(logs.String(), "serving from a new server") || !strings.Contains(logs.String(), good.URL) {
		t.Fatalf("no log line of the serving server:\n%s", logs)
	}

	// Within the cool-off only the good server is asked.
	clk.add(29 * time.Second)
	if err := p.Do(ctx, get(&body)); err != nil || failing.hits.Load() != 1 || good.hits.Load() != 2 {
		t.Fatalf("within the cool-off: %v, failing %d, good %d", err, failing.hits.Load(), good.hits.Load())
	}
	// After it, the preferred servers are asked again, fail again, and
	// are skipped for twice as long.
	clk.add(2 * time.Second)
	if err := p.Do(ctx, get(&body)); err != nil || failing.hits.Load() != 2 || good.hits.Load() != 3 {
		t.Fatalf("after the cool-off: %v, failing %d, good %d", err, failing.hits.Load(), good.hits.Load())
	}
	clk.add(31 * time.Second)
	if err := p.Do(ctx, get(&body)); err != nil || failing.hits.Load() != 2 {
		t.Fatalf("the doubled cool-off was not kept: failing %d", failing.hits.Load())
	}
	clk.add(30 * time.Second)
	if err := p.Do(ctx, get(&body)); err != nil || failing.hits.Load() != 3 {
		t.Fatalf("not retried after the doubled cool-off: failing %d", failing.hits.Load())
	}
}

// A server that sends nothing within the first-byte timeout is left for
// the next, within the same request; the last server is not held to it.
func TestSlowFirstByte(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	slow := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	good := serve(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "answer") })
	p, _, _ := newPool([]string{slow.URL, good.URL}, Config{FirstByte: 100 * time.Millisecond})
	var body string
	if err := p.Do(context.Background(), get(&body)); err != nil || body != "answer" {
		t.Fatalf("%q, %v", body, err)
	}
	if st := p.Status(); st.Servers[0].State != "down" || !strings.Contains(st.Servers[0].Error, ErrNoFirstByte.Error()) {
		t.Fatalf("status %+v", st)
	}

	var bounds []time.Duration
	p2, _, _ := newPool([]string{"a", "b"}, Config{FirstByte: time.Second})
	_ = p2.Do(context.Background(), func(_ context.Context, a Attempt) error {
		bounds = append(bounds, a.FirstByte)
		return Down(errors.New("refused"))
	})
	if len(bounds) != 2 || bounds[0] != time.Second || bounds[1] != 0 {
		t.Fatalf("first-byte bounds %v: the last server must have none", bounds)
	}
}

// Once bytes flowed, a failure is the request's: no other server is
// asked (it would repeat them), and the server is not set aside.
func TestMidStreamErrorIsNotRetried(t *testing.T) {
	broken := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "the start")
	})
	good := serve(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "answer") })
	p, _, _ := newPool([]string{broken.URL, good.URL}, Config{})
	var body string
	err := p.Do(context.Background(), get(&body))
	if err == nil || !strings.Contains(body, "the start") || good.hits.Load() != 0 {
		t.Fatalf("err %v, body %q, good asked %d times", err, body, good.hits.Load())
	}
	var o *Outage
	if errors.As(err, &o) {
		t.Fatalf("a mid-stream failure reported as an outage: %v", err)
	}
	if st := p.Status(); st.Servers[0].State != "serving" {
		t.Fatalf("status %+v", st)
	}
}

// With every server down, a request still asks one, the one that failed
// longest ago, and the error is an outage, numbered once per outage.
func TestOutage(t *testing.T) {
	p, clk, logs := newPool([]string{"a", "b"}, Config{CoolOff: 30 * time.Second})
	var asked []string
	up := map[string]bool{}
	try := func(_ context.Context, a Attempt) error {
		asked = append(asked, a.Server)
		if up[a.Server] {
			return nil
		}
		return Down(errors.New(a.Server + " refused"))
	}
	ctx := context.Background()
	err := p.Do(ctx, try)
	var o *Outage
	if !errors.As(err, &o) || o.Kind != "llm" || o.Epoch != 1 || strings.Join(asked, ",") != "a,b" {
		t.Fatalf("%v, asked %v", err, asked)
	}
	if st := p.Status(); st.Serving != "" {
		t.Fatalf("serving %q with every server down", st.Serving)
	}
	clk.add(time.Second)
	asked = nil
	err = p.Do(ctx, try)
	if !errors.As(err, &o) || o.Epoch != 1 || strings.Join(asked, ",") != "a" {
		t.Fatalf("during the outage: %v, asked %v", err, asked)
	}
	// a failed again last: b is now the one that failed longest ago.
	asked = nil
	_ = p.Do(ctx, try)
	if strings.Join(asked, ",") != "b" {
		t.Fatalf("asked %v, not the least recently failed", asked)
	}
	// b comes back: once its cool-off (doubled, 60 s) is over it is asked
	// first, while a (failed three times) still cools off.
	up["b"] = true
	asked = nil
	if err := p.Do(ctx, try); !errors.As(err, &o) || strings.Join(asked, ",") != "a" {
		t.Fatalf("probed %v (%v), not a", asked, err)
	}
	clk.add(61 * time.Second)
	asked = nil
	if err := p.Do(ctx, try); err != nil || strings.Join(asked, ",") != "b" {
		t.Fatalf("after b's cool-off: %v, asked %v", err, asked)
	}
	if st := p.Status(); st.Serving != "b" || st.Servers[0].State != "down" {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(logs.String(), "every server is down") || !strings.Contains(logs.String(), "a server is back") {
		t.Fatalf("logs:\n%s", logs)
	}
	up["b"] = false
	clk.add(10 * time.Minute)
	if err := p.Do(ctx, try); !errors.As(err, &o) || o.Epoch != 2 {
		t.Fatalf("a new outage after recovery: %v", err)
	}
}

// Requests in flight together that fail on the same server are one
// failure of it, not one each: a short blip under load sets the server
// aside for the first cool-off, not the longest. A request that asks it
// again once that is over and fails counts anew.
func TestConcurrentFailuresCountOnce(t *testing.T) {
	p, clk, logs := newPool([]string{"a", "b"}, Config{CoolOff: 30 * time.Second})
	ctx := context.Background()
	const inFlight = 20
	// Every request has chosen a before any of them fails on it.
	var chose, failing sync.WaitGroup
	chose.Add(inFlight)
	failing.Add(inFlight)
	try := func(_ context.Context, a Attempt) error {
		if a.Server == "b" {
			return nil
		}
		chose.Done()
		chose.Wait()
		return Down(errors.New("restarting"))
	}
	for range inFlight {
		go func() {
			defer failing.Done()
			_ = p.Do(ctx, try)
		}()
	}
	failing.Wait()
	st := p.Status()
	if st.Servers[0].State != "down" || st.Servers[0].RetryIn != "30s" || st.Serving != "b" {
		t.Fatalf("after %d failures in flight together: %+v", inFlight, st)
	}
	if n := strings.Count(logs.String(), "failover: server down"); n != 1 {
		t.Fatalf("%d log lines of the server going down, want 1:\n%s", n, logs)
	}
	// Once the cool-off is over, a fails again: its second failure in a
	// row, which doubles the cool-off.
	clk.add(31 * time.Second)
	chose.Add(1)
	_ = p.Do(ctx, try)
	if st := p.Status(); st.Servers[0].RetryIn != "1m0s" {
		t.Fatalf("after a second failure: %+v", st)
	}
}

// Order lists the servers not cooling off first, in preference order,
// then the others, the one that failed longest ago first.
func TestOrder(t *testing.T) {
	p, clk, _ := newPool([]string{"a", "b", "c", "d"}, Config{CoolOff: 30 * time.Second})
	down := map[string]bool{"a": true, "c": true}
	try := func(_ context.Context, a Attempt) error {
		if down[a.Server] {
			return Down(errors.New("refused"))
		}
		return nil
	}
	_ = p.Do(context.Background(), try) // a fails, b serves
	if got := strings.Join(p.Order(), ","); got != "b,c,d,a" {
		t.Fatalf("order %s", got)
	}
	clk.add(time.Second)
	down["b"] = true
	_ = p.Do(context.Background(), try) // b and c fail, d serves
	if got := strings.Join(p.Order(), ","); got != "d,a,b,c" {
		t.Fatalf("order %s", got)
	}
}

// Open returns the body with its first byte, an empty body as io.EOF,
// and ErrNoFirstByte once the time is up, with the context's cause set.
func TestOpen(t *testing.T) {
	_, fb := Watch(context.Background(), Attempt{FirstByte: time.Hour})
	br, err := fb.Open(strings.NewReader("answer"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(br); string(b) != "answer" {
		t.Fatalf("body %q", b)
	}
	fb.Release()

	_, fb = Watch(context.Background(), Attempt{FirstByte: time.Hour})
	if _, err := fb.Open(strings.NewReader("")); !errors.Is(err, io.EOF) {
		t.Fatalf("empty body: %v", err)
	}
	fb.Release()

	// The time runs out while the server is silent; the byte comes after.
	fctx, fb := Watch(context.Background(), Attempt{FirstByte: time.Nanosecond})
	defer fb.Release()
	<-fctx.Done()
	if _, err := fb.Open(strings.NewReader("late")); !errors.Is(err, ErrNoFirstByte) || !TimedOut(fctx) {
		t.Fatalf("late byte: %v, timed out %v", err, TimedOut(fctx))
	}
}
