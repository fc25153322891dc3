package room

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// failureAddressesMax bounds the addresses the token endpoint remembers
// failures of: about 200 bytes each.
const failureAddressesMax = 10_000

// failureLimiter counts wrong secrets per client address in a token
// bucket: burst failures at once, then one per every. A request takes its
// token before its secret is compared, in the same locked step that looks
// at the bucket, so parallel guesses from one address cannot all pass the
// check before any of them is counted; the right secret gives its token
// back. A bucket that has filled up again says nothing a missing one would
// not, so idle addresses are forgotten: the addresses are kept from the
// most to the least recently used, so that at the cap the one idle longest
// goes in O(1), and once a minute the ones idle long enough to be full
// again go from the back.
type failureLimiter struct {
	every time.Duration
	burst int
	max   int
	now   func() time.Time

	mu        sync.Mutex
	addrs     map[string]*list.Element // of *failures
	lru       *list.List               // front: the address used last
	lastSweep time.Time
}

type failures struct {
	addr string
	lim  *rate.Limiter
	last time.Time
}

func newFailureLimiter(burst int, every time.Duration, max int, now func() time.Time) *failureLimiter {
	return &failureLimiter{every: every, burst: burst, max: max, now: now, addrs: map[string]*list.Element{}, lru: list.New()}
}

// take spends one of addr's tries before its secret is compared. wait > 0
// means none is left: addr may try again after wait, and nothing was
// spent. Otherwise refund gives the try back (call it when the secret was
// right), and last says this try was addr's last one.
func (l *failureLimiter) take(addr string) (refund func(), wait time.Duration, last bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	e := l.addrs[addr]
	if e == nil {
		if l.lru.Len() >= l.max {
			l.forget(l.lru.Back())
		}
		e = l.lru.PushFront(&failures{addr: addr, lim: rate.NewLimiter(rate.Every(l.every), l.burst)})
		l.addrs[addr] = e
	} else {
		l.lru.MoveToFront(e)
	}
	f := e.Value.(*failures)
	f.last = now
	if tokens := f.lim.TokensAt(now); tokens < 1 {
		return nil, time.Duration((1 - tokens) * float64(l.every)), false
	}
	r := f.lim.ReserveN(now, 1) // a token is there: no delay
	last = f.lim.TokensAt(now) < 1
	return func() { l.refund(e, r, now) }, 0, last
}

// refund gives back the try r took at the time at. It is cancelled at
// that time, not later: a reservation cancelled after the time it was
// for restores nothing. An address whose bucket is full again is
// forgotten at once, so that the right secret leaves no trace.
func (l *failureLimiter) refund(e *list.Element, r *rate.Reservation, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := e.Value.(*failures)
	r.CancelAt(at)
	if l.addrs[f.addr] == e && f.lim.TokensAt(l.now()) >= float64(l.burst) {
		l.forget(e)
	}
}

// sweep forgets, once a minute, the addresses idle long enough for their
// bucket to be full again. Those are at the back of the list: it stops at
// the first that is not. Called with mu held.
func (l *failureLimiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	full := time.Duration(l.burst) * l.every
	for e := l.lru.Back(); e != nil && now.Sub(e.Value.(*failures).last) >= full; e = l.lru.Back() {
		l.forget(e)
	}
}

// forget drops an address. Called with mu held.
func (l *failureLimiter) forget(e *list.Element) {
	delete(l.addrs, e.Value.(*failures).addr)
	l.lru.Remove(e)
}

func (l *failureLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}

// clientAddress is who the failures are counted against: the
// connection's remote address, or, behind a proxy the operator trusts,
// the address that proxy appended to X-Forwarded-For (the last one;
// those before it are the client's to write). A forwarded value that is
// not an address (a proxy's "unknown", an obfuscated name) counts as the
// connection's address. An IPv6 client counts as its /64, which one host
// usually holds whole.
func clientAddress(r *http.Request, trustForwarded bool) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, ok := parseHost(host)
	if trustForwarded {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			parts := strings.Split(xff[len(xff)-1], ",")
			if fwd, fok := parseHost(strings.TrimSpace(parts[len(parts)-1])); fok {
				ip, ok = fwd, true
			}
		}
	}
	if !ok {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.WithZone("").Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// parseHost reads an address as proxies write it into X-Forwarded-For:
// bare, with a port (ip:port, [v6]:port), or an IPv6 one in brackets. A
// port must not make the value a key of its own, or each new source port
// would be a fresh bucket.
func parseHost(s string) (netip.Addr, bool) {
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	} else if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	ip, err := netip.ParseAddr(s)
	return ip, err == nil
}

// proxied reports a request that carries X-Forwarded-For from a loopback
// or private address: most likely a proxy in front of this server, whose
// address every client behind it then shares.
func proxied(r *http.Request) bool {
	if r.Header.Get("X-Forwarded-For") == "" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, ok := parseHost(host)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate()
}
