package room

import (
	"container/list"
	"context"
	"crypto/subtle"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	protoagent "github.com/livekit/protocol/agent"
	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/httpjson"
	"github.com/alicia-voice/alicia/reasoning"

	"github.com/alicia-voice/alicia/wire"
)

// TokenTTL is how long a minted user token is valid.
const TokenTTL = 6 * time.Hour

type tokenRequest struct {
	Room     string `json:"room"`
	Identity string `json:"identity"`
	Name     string `json:"name"`
	// Features the client can display, and a preference to set: written
	// into the token's participant attributes, so the bot knows them
	// whenever it joins.
	Features            []string       `json:"features"`
	ReasoningPreference reasoning.Mode `json:"reasoningPreference"`
}

type tokenResponse struct {
	Token    string `json:"token"`
	URL      string `json:"url"`
	Room     string `json:"room"`
	Identity string `json:"identity"`
}

// UserToken mints a token for identity to join room, whose room
// configuration dispatches the agent when the join creates the room, with
// participant attributes (see AttrFeatures; nil for none), which the bot
// reads when it joins. The token lets its participant set its own
// attributes, so a client may change them later.
func UserToken(cfg Config, room, identity, name string, attrs map[string]string) (string, error) {
	cfg.withDefaults()
	grant := &auth.VideoGrant{RoomJoin: true, Room: room}
	grant.SetCanUpdateOwnMetadata(true)
	at := auth.NewAccessToken(cfg.APIKey, cfg.APISecret).
		SetIdentity(identity).SetName(name).SetValidFor(TokenTTL).
		SetVideoGrant(grant).
		SetRoomConfig(&livekit.RoomConfiguration{Agents: cfg.roomAgents()})
	if len(attrs) > 0 {
		at.SetAttributes(attrs)
	}
	return at.ToJWT()
}

// TokenHandler serves POST /v1/token: {room?, identity, name?, features?,
// reasoningPreference?} → a user
// token for the room (a new conversation when room is empty). It is
// protected by the token secret (or the API secret) as a bearer token.
// When the room already exists without a bot (its bot crashed), it asks
// LiveKit for one again.
//
// Wrong secrets are limited per client address (see failureLimiter): an
// address that spent its failures is answered 429 with Retry-After, before
// its secret is compared, until it may try again. The right secret spends
// nothing. Behind a proxy that is not trusted (Config.TrustForwardedFor)
// every client has the proxy's address and shares its limit.
func (a *Agent) TokenHandler() http.Handler { return a.tokenHandler(time.Now, nil) }

// tokenHandler is TokenHandler with the limiter's clock, and compared,
// when not nil, called after a secret was compared and before what that
// costs is settled: a test holds requests there to find out how many get
// that far at once.
func (a *Agent) tokenHandler(now func() time.Time, compared func()) http.Handler {
	rooms := lksdk.NewRoomServiceClient(a.cfg.httpURL(), a.cfg.APIKey, a.cfg.APISecret)
	secret := a.cfg.TokenSecret
	if secret == "" {
		secret = a.cfg.APISecret
	}
	failures := newFailureLimiter(a.cfg.TokenFailureBurst, a.cfg.TokenFailureEvery, failureAddressesMax, now)
	// Said once per handler: the setting is the same for every request.
	var proxyWarning sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(status int, msg string) { httpjson.Error(w, status, msg) }
		if !a.cfg.TrustForwardedFor && proxied(r) {
			proxyWarning.Do(func() {
				a.log.Warn("X-Forwarded-For from a loopback or private address, which is not trusted: wrong token secrets are limited per proxy address, so one client behind the proxy can lock every other out; set ALICIA_TRUST_FORWARDED_FOR=true if that proxy is the only way in",
					"proxy", r.RemoteAddr)
			})
		}
		addr := clientAddress(r, a.cfg.TrustForwardedFor)
		// The try is spent before the secret is compared, in one locked
		// step with the check: parallel guesses are counted one by one.
		refund, wait, last := failures.take(addr)
		if wait > 0 {
			a.metrics.tokenRefused.Inc()
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			fail(http.StatusTooManyRequests, "too many wrong secrets from this address; try again after Retry-After seconds")
			return
		}
		given, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		right := subtle.ConstantTimeCompare([]byte(given), []byte(secret)) == 1
		if compared != nil {
			compared()
		}
		if !right {
			if last {
				a.log.Warn("wrong token secrets from one address: throttled", "address", addr)
			}
			fail(http.StatusUnauthorized, "a valid bearer secret is required")
			return
		}
		refund()
		var req tokenRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
			fail(http.StatusBadRequest, "body must be JSON: {\"identity\": …, \"room\": …}")
			return
		}
		if !roomNameOK(req.Identity) {
			fail(http.StatusBadRequest, "identity is required (no spaces or slashes, at most 128 characters)")
			return
		}
		newRoom := req.Room == ""
		if newRoom {
			req.Room = wire.NewID("conv")
		} else if !roomNameOK(req.Room) {
			fail(http.StatusBadRequest, "room must have no spaces or slashes and at most 128 characters")
			return
		}
		attrs := map[string]string{}
		if req.Features != nil {
			for _, f := range req.Features {
				if f == "" || strings.ContainsAny(f, ", ") {
					fail(http.StatusBadRequest, "features are words without commas or spaces")
					return
				}
			}
			attrs[AttrFeatures] = strings.Join(req.Features, ",")
		}
		if req.ReasoningPreference != "" {
			if !req.ReasoningPreference.Valid() {
				fail(http.StatusBadRequest, "reasoningPreference is off, summary or full")
				return
			}
			attrs[AttrReasoningPreference] = string(req.ReasoningPreference)
		}
		token, err := UserToken(a.cfg, req.Room, req.Identity, req.Name, attrs)
		if err != nil {
			fail(http.StatusInternalServerError, err.Error())
			return
		}
		if newRoom {
			a.openRoom(r.Context(), rooms, req.Room)
		} else {
			a.ensureBot(r.Context(), rooms, req.Room)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(tokenResponse{Token: token, URL: a.cfg.LiveKitURL, Room: req.Room, Identity: req.Identity})
	})
}

// openRoom creates a new conversation's room before its user has the
// token. Unless DispatchOnly, with room for one more conversation, this
// process's bot joins it at once: LiveKit hands a dispatched job to a
// worker only some 200 ms after the room is created (its RPC waits that
// long for better offers than the first), most of a user's wait for the
// greeting. Otherwise the room is created with the agent dispatched,
// which overlaps that wait with the user's own join. Either way the bot
// may be in the room first: awaitFirstUser finds the user. Should the
// room not be created, the token's room configuration dispatches the bot
// when the user's join creates it, only later.
func (a *Agent) openRoom(ctx context.Context, rooms *lksdk.RoomServiceClient, room string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	j, token := a.joinOnToken(room)
	req := &livekit.CreateRoomRequest{Name: room}
	if j == nil {
		req.Agents = a.cfg.roomAgents()
	}
	if _, err := rooms.CreateRoom(ctx, req); err != nil {
		a.log.Warn("could not open the room ahead of its user; the user's join will", "room", room, "err", err)
		if j != nil {
			a.drop(j)
			a.wg.Done()
		}
		return
	}
	if j != nil {
		a.launch(j, token)
	}
}

// joinOnToken admits a job for a room this process opens, with the bot's
// token for it, or returns nil when the room is left to LiveKit's
// dispatch.
func (a *Agent) joinOnToken(room string) (*job, string) {
	if a.cfg.DispatchOnly {
		return nil, ""
	}
	token, err := protoagent.BuildAgentToken(a.cfg.APIKey, a.cfg.APISecret, room, BotIdentity, botName, "",
		map[string]string{lkAgentNameAttr: a.cfg.AgentName}, botPermissions())
	if err != nil {
		a.log.Error("minting the bot's token; the room is left to LiveKit's dispatch", "room", room, "err", err)
		return nil, ""
	}
	j := &job{id: wire.NewID("job"), room: room, ended: make(chan struct{})}
	if refusal := a.admit(j, true); refusal != "" {
		a.log.Debug("the room is left to LiveKit's dispatch", "room", room, "why", refusal)
		return nil, ""
	}
	return j, token
}

// lkAgentNameAttr is the attribute LiveKit gives a dispatched agent's
// participant, its agent name; a bot that joins on its own has it too.
const lkAgentNameAttr = "lk.agent_name"

// ensureBot dispatches the agent to an existing room that has none. A new
// room gets its bot when openRoom creates it.
func (a *Agent) ensureBot(ctx context.Context, rooms *lksdk.RoomServiceClient, room string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
	if err != nil || len(res.Participants) == 0 {
		return
	}
	for _, p := range res.Participants {
		if p.Kind == livekit.ParticipantInfo_AGENT {
			return
		}
	}
	a.log.Info("room without a bot; dispatching one", "room", room)
	a.redispatch(room)
}

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
