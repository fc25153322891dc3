package room

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
)

// fakeClock is the limiter's clock in a test: it moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip, so that the server sees another client address.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

func askToken(t *testing.T, c *http.Client, url, secret string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/v1/token", bytes.NewReader([]byte(`{"identity":"alice"}`)))
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// Wrong token secrets from one address are answered 401 until the
// address's failures are spent, then 429 with Retry-After, whatever the
// secret; the right secret never spends them, another address is served
// at once, and the throttled address may try again once Retry-After has
// passed.
func TestTokenSecretFailuresAreThrottled(t *testing.T) {
	const secret = "the-right-token-secret"
	metrics := NewMetrics(prometheus.NewRegistry())
	// No livekit-server: the token endpoint only asks LiveKit whether an
	// existing room lacks a bot, and goes on when it cannot.
	cfg := Config{LiveKitURL: "ws://127.0.0.1:1", APIKey: "APItest", APISecret: "api-secret-of-this-test", TokenSecret: secret,
		TokenFailureBurst: 10, TokenFailureEvery: time.Second}
	a := NewAgent(cfg, storage.NewMemory(storage.ReasoningPlain), metrics, openEcho, testenv.Log(t))
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	srv := httptest.NewServer(a.tokenHandler(clock.Now, nil))
	t.Cleanup(srv.Close)
	attacker, user := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	for i := range 10 {
		if i%3 == 0 {
			// The right secret from the same address spends nothing.
			if res := askToken(t, attacker, srv.URL, secret); res.StatusCode != http.StatusOK {
				t.Fatalf("right secret before the failures ran out: HTTP %d", res.StatusCode)
			}
		}
		if res := askToken(t, attacker, srv.URL, "guess-"+strconv.Itoa(i)); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong secret %d: HTTP %d, want 401", i+1, res.StatusCode)
		}
	}
	var retry int
	for i := range 200 {
		res := askToken(t, attacker, srv.URL, "guess-more-"+strconv.Itoa(i))
		if res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("wrong secret %d after the failures ran out: HTTP %d, want 429", 11+i, res.StatusCode)
		}
		n, err := strconv.Atoi(res.Header.Get("Retry-After"))
		if err != nil || n < 1 {
			t.Fatalf("429 with Retry-After %q", res.Header.Get("Retry-After"))
		}
		retry = n
	}
	// While throttled the secret is not even compared: the right one is
	// refused too, or guessing would go on.
	if res := askToken(t, attacker, srv.URL, secret); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right secret from the throttled address: HTTP %d, want 429", res.StatusCode)
	}
	if res := askToken(t, user, srv.URL, secret); res.StatusCode != http.StatusOK {
		t.Fatalf("right secret from another address: HTTP %d, want 200", res.StatusCode)
	}
	if res := askToken(t, user, srv.URL, "a-typo"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another address's first wrong secret: HTTP %d, want 401", res.StatusCode)
	}
	if got := counterValue(t, metrics.tokenRefused); got != 201 {
		t.Fatalf("alicia_room_token_throttled_total = %v, want 201", got)
	}

	clock.Add(time.Duration(retry) * time.Second)
	if res := askToken(t, attacker, srv.URL, "one-more-guess"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong secret after Retry-After: HTTP %d, want 401", res.StatusCode)
	}
	if res := askToken(t, attacker, srv.URL, "and-another"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second wrong secret after Retry-After: HTTP %d, want 429 (one failure a second)", res.StatusCode)
	}
	clock.Add(time.Duration(retry) * time.Second)
	if res := askToken(t, attacker, srv.URL, secret); res.StatusCode != http.StatusOK {
		t.Fatalf("right secret after Retry-After: HTTP %d, want 200", res.StatusCode)
	}
}

// The limiter's memory is bounded: at its cap it forgets the address
// idle longest, and an address whose failures have all come back is
// forgotten at the next sweep.
func TestTokenFailureLimiterIsBounded(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newFailureLimiter(3, time.Second, 4, clock.Now)
	// A try taken and not refunded is a wrong secret.
	fail := func(addr string) { l.take(addr) }
	for i := range 10 {
		fail("198.51.100." + strconv.Itoa(i))
		clock.Add(time.Millisecond)
	}
	if n := l.size(); n > 4 {
		t.Fatalf("%d addresses kept, cap 4", n)
	}
	// The most recent one is still counted.
	fail("198.51.100.9")
	fail("198.51.100.9")
	if _, wait, _ := l.take("198.51.100.9"); wait <= 0 {
		t.Fatal("the most recent address lost its failures to eviction")
	}
	// At the cap the address used longest ago goes, not one in use.
	fail("198.51.100.20")
	if _, wait, _ := l.take("198.51.100.9"); wait <= 0 {
		t.Fatal("an address in use was evicted before one idle longer")
	}
	clock.Add(time.Hour)
	fail("203.0.113.1")
	if n := l.size(); n != 1 {
		t.Fatalf("%d addresses kept after an hour idle, want only the new one", n)
	}
	// The right secret leaves no trace.
	refund, _, _ := l.take("203.0.113.2")
	refund()
	if n := l.size(); n != 1 {
		t.Fatalf("%d addresses kept after a right secret, want 1", n)
	}
}

// Parallel wrong secrets from one address are counted one by one: the
// limit holds at the attacker's concurrency, not only one request at a
// time. Each request that gets its secret compared is held right after
// the comparison, before its failure is settled, until every request has
// either got that far or been refused: were the check and the count two
// steps, all of them would pass the check first. The clock does not move,
// so no failure comes back meanwhile.
func TestTokenSecretFailuresAreThrottledInParallel(t *testing.T) {
	const burst, parallel = 10, 200
	cfg := Config{LiveKitURL: "ws://127.0.0.1:1", APIKey: "APItest", APISecret: "api-secret-of-this-test", TokenSecret: "the-right-token-secret",
		TokenFailureBurst: burst, TokenFailureEvery: time.Second}
	a := NewAgent(cfg, storage.NewMemory(storage.ReasoningPlain), NewMetrics(prometheus.NewRegistry()), openEcho, testenv.Log(t))
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	reached, gate := make(chan struct{}, parallel), make(chan struct{})
	srv := httptest.NewServer(a.tokenHandler(clock.Now, func() {
		reached <- struct{}{}
		<-gate
	}))
	t.Cleanup(srv.Close)
	attacker := clientFrom("127.0.0.1")

	codes := make(chan int, parallel)
	var done sync.WaitGroup
	for i := range parallel {
		done.Go(func() {
			codes <- askToken(t, attacker, srv.URL, "parallel-guess-"+strconv.Itoa(i)).StatusCode
		})
	}
	got := map[int]int{}
	held := 0
	for held+got[http.StatusTooManyRequests] < parallel {
		select {
		case <-reached:
			held++
		case c := <-codes:
			if c != http.StatusTooManyRequests {
				t.Fatalf("HTTP %d before any compared secret was let through", c)
			}
			got[c]++
		}
	}
	close(gate)
	done.Wait()
	close(codes)
	for c := range codes {
		got[c]++
	}
	if held > burst || got[http.StatusUnauthorized] != held || got[http.StatusTooManyRequests] != parallel-held {
		t.Fatalf("%d parallel wrong secrets: %d compared at once, %v by status; want at most %d compared (401), the rest 429", parallel, held, got, burst)
	}
}

// Behind a trusted proxy the client address is the one the proxy
// appended to X-Forwarded-For; otherwise the header is ignored, since
// any client can write it.
func TestTokenClientAddress(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/token", nil)
	r.RemoteAddr = "192.0.2.10:4242"
	r.Header.Set("X-Forwarded-For", "203.0.113.7, 198.51.100.3")
	if got := clientAddress(r, false); got != "192.0.2.10" {
		t.Fatalf("untrusted header: %q", got)
	}
	if got := clientAddress(r, true); got != "198.51.100.3" {
		t.Fatalf("trusted proxy: %q", got)
	}
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:4242"
	if got := clientAddress(r, false); got != "2001:db8:1:2::/64" {
		t.Fatalf("IPv6: %q (one host holds a whole /64)", got)
	}
}

// A proxy may write the client's port into X-Forwarded-For: the address
// without it is the key, or each new source port would be a fresh
// bucket. A value that is no address counts as the connection's.
func TestTokenClientAddressWithPort(t *testing.T) {
	for _, c := range []struct{ xff, want string }{
		{"203.0.113.7:51234", "203.0.113.7"},
		{"198.51.100.1, 203.0.113.7:443", "203.0.113.7"},
		{"[2001:db8:1:2::9]:51234", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::9]", "2001:db8:1:2::/64"},
		{"2001:db8:1:2::9", "2001:db8:1:2::/64"},
		{"::ffff:203.0.113.7", "203.0.113.7"},
		{"unknown", "192.0.2.10"},
		{"_hidden:8080", "192.0.2.10"},
		{"[not-an-address]:80", "192.0.2.10"},
		{"", "192.0.2.10"},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/token", nil)
		r.RemoteAddr = "192.0.2.10:4242"
		r.Header.Set("X-Forwarded-For", c.xff)
		if got := clientAddress(r, true); got != c.want {
			t.Errorf("X-Forwarded-For %q: client address %q, want %q", c.xff, got, c.want)
		}
	}
}

// A request with X-Forwarded-For from a loopback or private address
// while the header is not trusted is most likely from a proxy whose
// clients all share its limit: the server warns about it, once.
func TestTokenWarnsOnceAboutAnUntrustedProxy(t *testing.T) {
	var logged testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	cfg := Config{LiveKitURL: "ws://127.0.0.1:1", APIKey: "APItest", APISecret: "api-secret-of-this-test", TokenSecret: "the-right-token-secret"}
	a := NewAgent(cfg, storage.NewMemory(storage.ReasoningPlain), NewMetrics(prometheus.NewRegistry()), openEcho, log)
	h := a.TokenHandler()
	ask := func(remote, xff string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/token", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	ask("203.0.113.9:4242", "198.51.100.3") // public: a client writing the header
	ask("10.0.0.2:4242", "")                // private, no header
	if n := strings.Count(logged.String(), "ALICIA_TRUST_FORWARDED_FOR"); n != 0 {
		t.Fatalf("warned %d times with no proxy in sight:\n%s", n, logged.String())
	}
	ask("10.0.0.2:4242", "198.51.100.3")
	ask("[::1]:4242", "198.51.100.4")
	if n := strings.Count(logged.String(), "ALICIA_TRUST_FORWARDED_FOR"); n != 1 {
		t.Fatalf("warned %d times about the proxy, want once:\n%s", n, logged.String())
	}
}
