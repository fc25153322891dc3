package room

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/alicia-voice/alicia/wire"
)

// Config says where LiveKit is and how the bot presents itself. Every
// field is a flag, and an ALICIA_ environment variable of the same name
// (see Flags).
type Config struct {
	LiveKitURL string // ALICIA_LIVEKIT_URL
	APIKey     string // ALICIA_LIVEKIT_API_KEY
	APISecret  string // ALICIA_LIVEKIT_API_SECRET
	AgentName  string // ALICIA_AGENT_NAME
	HTTPAddr   string // ALICIA_HTTP_ADDR
	// TokenSecret protects POST /v1/token; empty means the API secret.
	TokenSecret string // ALICIA_TOKEN_SECRET
	// MaxSessions is the capacity reported to LiveKit as load.
	MaxSessions int // ALICIA_MAX_SESSIONS
	// TargetLoad is the livekit-server's agents.target_load (LiveKit's
	// default 0.7): LiveKit dispatches no job to a worker whose load has
	// reached it, so MaxSessions conversations are reported as this load.
	TargetLoad float64 // ALICIA_LIVEKIT_TARGET_LOAD
	// EmptyTimeout: how long the bot stays once every user has left.
	EmptyTimeout time.Duration
	// TokenFailureBurst wrong token secrets from one client address are
	// answered 401, then one per TokenFailureEvery; the others 429.
	TokenFailureBurst int           // ALICIA_TOKEN_FAILURE_BURST
	TokenFailureEvery time.Duration // ALICIA_TOKEN_FAILURE_EVERY
	// TrustForwardedFor: the token endpoint is behind a proxy that
	// appends the client's address to X-Forwarded-For. Off, the header is
	// ignored: any client can write it.
	TrustForwardedFor bool // ALICIA_TRUST_FORWARDED_FOR
	// AssumeAfter is how long a client that sent a message but never a
	// Configuration is asked for one before it is served as a client with
	// AssumedFeatures.
	AssumeAfter     time.Duration  // ALICIA_ASSUME_CONFIGURATION_AFTER
	AssumedFeatures *wire.Features // ALICIA_ASSUMED_FEATURES; nil: defaultAssumedFeatures
	// LeaseTTL: with Postgres, each process renews a lease this long,
	// several times per period; when one lapses, another process has its
	// rooms dispatched again at once. Longer tolerates slower database
	// round trips before a live process is taken for dead; shorter brings
	// a killed process's users a new bot sooner.
	LeaseTTL time.Duration // ALICIA_LEASE_TTL
	// DispatchOnly: every bot joins through LiveKit's dispatch. Otherwise
	// a new conversation's room, opened by POST /v1/token, is joined by
	// this process's bot at once when it has room for one more, rather
	// than by the process LiveKit's dispatch picks some 200 ms later.
	DispatchOnly bool // ALICIA_DISPATCH_ONLY
}

// Flags registers the configuration's flags on fs. There is no default
// key or secret: with no LiveKit URL, serve starts a livekit-server and
// makes its own; with one, Validate requires both.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.LiveKitURL, "livekit-url", "", "LiveKit server URL; empty starts a local livekit-server")
	fs.StringVar(&c.APIKey, "livekit-api-key", "", "LiveKit API key (required with -livekit-url)")
	fs.StringVar(&c.APISecret, "livekit-api-secret", "", "LiveKit API secret (required with -livekit-url)")
	fs.StringVar(&c.AgentName, "agent-name", defaultAgentName, "agent name LiveKit dispatches; processes sharing it share the rooms")
	fs.StringVar(&c.HTTPAddr, "http-addr", DefaultHTTPAddr, "address of the HTTP API")
	fs.StringVar(&c.TokenSecret, "token-secret", "", "shared secret for POST /v1/token; default: the API secret")
	fs.IntVar(&c.MaxSessions, "max-sessions", defaultMaxSessions, "conversations this process takes before it reports itself full")
	fs.Float64Var(&c.TargetLoad, "livekit-target-load", defaultTargetLoad, "the livekit-server's agents.target_load: the load at which LiveKit stops dispatching")
	fs.DurationVar(&c.EmptyTimeout, "empty-timeout", defaultEmptyTimeout, "how long the bot stays in a room nobody is in")
	fs.IntVar(&c.TokenFailureBurst, "token-failure-burst", defaultFailureBurst, "wrong token secrets one client address may send before it is throttled")
	fs.DurationVar(&c.TokenFailureEvery, "token-failure-every", defaultFailureEvery, "a throttled address gets one more try this often")
	fs.BoolVar(&c.TrustForwardedFor, "trust-forwarded-for", false, "the HTTP API is behind a proxy that appends the client address to X-Forwarded-For")
	fs.DurationVar(&c.AssumeAfter, "assume-configuration-after", defaultAssumeAfter, "how long a client that talks without a Configuration is asked for one before it is served with -assumed-features")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", defaultLeaseTTL, "with Postgres: how long this process's lease lasts unrenewed before another process takes its rooms over")
	fs.BoolVar(&c.DispatchOnly, "dispatch-only", false, "every bot joins through LiveKit's dispatch, even for a new conversation this process opened for a token (which it otherwise joins at once)")
	fs.Func("assumed-features", "features assumed for a client that never sent a Configuration, comma-separated (default "+strings.Join(defaultAssumedFeatures.List(), ",")+"; 'none' for none)", func(v string) error {
		f := wire.ParseFeatureList(v)
		if strings.TrimSpace(v) == "none" {
			f = wire.Features{}
		}
		c.AssumedFeatures = &f
		return nil
	})
}

// DefaultHTTPAddr is where the HTTP API listens, and where the commands
// that talk to a serve look for it, unless told otherwise.
const DefaultHTTPAddr = "127.0.0.1:8080"

// The defaults of the settings, for the flags and for a Config built in
// code with fields left zero (withDefaults).
const (
	defaultAgentName    = "alicia"
	defaultMaxSessions  = 500
	defaultTargetLoad   = 0.7 // livekit-server's own default target_load
	defaultEmptyTimeout = 30 * time.Second
	defaultFailureBurst = 10
	defaultFailureEvery = time.Second
	// defaultAssumeAfter: the grace runs from the client's first kept
	// message, which comes after the greeting, and the greeting goes out
	// again 1 s after it was first sent (greetAgain), for one that beat
	// the client's data channel. A client that answers greetings answers
	// the greeting or that repeat within the grace, with at least a
	// second for the round trip. The last repeat, 4 s after the greeting,
	// comes after the grace: it reaches a silent client that missed both.
	// A client that talked and missed both has been served with the
	// assumed features by then (and is not greeted again); its
	// Configuration, whenever it comes, replaces them like any settings
	// update. A grace long enough for that repeat would hold the first
	// question of every client that never answers for 4 s or more; one
	// held 2 s is still answered before a model would have finished
	// thinking about it.
	defaultAssumeAfter = 2 * time.Second
	// defaultLeaseTTL is renewed every quarter of it, so three renewals
	// in a row must fail (or take 375 ms more each) before a live process
	// is taken for dead; a killed one's rooms are dispatched again within
	// it plus one renewal period.
	defaultLeaseTTL = 1500 * time.Millisecond
)

// roomAgents is the dispatch of this deployment's agent to a room
// created with it.
func (c Config) roomAgents() []*livekit.RoomAgentDispatch {
	return []*livekit.RoomAgentDispatch{{AgentName: c.AgentName}}
}

// defaultAssumedFeatures are what the specification's clients announce:
// streamed answers and a panel for reasoning steps, so that a client that
// spoke the protocol well enough to send a Configuration sees the answer
// the way it asked for it in most cases.
var defaultAssumedFeatures = wire.Features{Streaming: true, ReasoningSteps: true}

// wellKnown are secrets published in LiveKit's and Alicia's documentation
// and examples: a deployment using one is open to anyone.
var wellKnown = []string{"secret", "devkey", "devsecret", "apisecret", "changeme", "password"}

// Validate fails closed on development credentials: with a LiveKit URL,
// the key and secret must be given, and neither the API secret nor the
// token secret may be a well-known default.
func (c *Config) Validate() error {
	if c.MaxSessions <= 0 {
		return fmt.Errorf("ALICIA_MAX_SESSIONS must be positive, not %d", c.MaxSessions)
	}
	if c.TargetLoad <= 0 || c.TargetLoad > 1 {
		return fmt.Errorf("ALICIA_LIVEKIT_TARGET_LOAD must be in (0, 1], not %v", c.TargetLoad)
	}
	if c.TokenFailureBurst <= 0 || c.TokenFailureEvery <= 0 {
		return fmt.Errorf("ALICIA_TOKEN_FAILURE_BURST and ALICIA_TOKEN_FAILURE_EVERY must be positive, not %d and %v", c.TokenFailureBurst, c.TokenFailureEvery)
	}
	if c.AssumeAfter <= 0 {
		return fmt.Errorf("ALICIA_ASSUME_CONFIGURATION_AFTER must be positive, not %v", c.AssumeAfter)
	}
	if c.LeaseTTL < 200*time.Millisecond {
		return fmt.Errorf("ALICIA_LEASE_TTL must be at least 200ms, not %v", c.LeaseTTL)
	}
	if c.LiveKitURL == "" {
		return nil // serve starts its own livekit-server with fresh credentials
	}
	if c.APIKey == "" || c.APISecret == "" {
		return errors.New("ALICIA_LIVEKIT_URL is set, so ALICIA_LIVEKIT_API_KEY and ALICIA_LIVEKIT_API_SECRET (or -livekit-api-key and -livekit-api-secret) must be set too")
	}
	for name, v := range map[string]string{"ALICIA_LIVEKIT_API_SECRET": c.APISecret, "ALICIA_TOKEN_SECRET": c.TokenSecret} {
		if slices.Contains(wellKnown, strings.ToLower(v)) {
			return fmt.Errorf("%s is a well-known default (%q): anyone could mint tokens; set a secret of your own", name, v)
		}
	}
	return nil
}

func (c *Config) withDefaults() {
	if c.MaxSessions <= 0 {
		c.MaxSessions = defaultMaxSessions
	}
	if c.TargetLoad <= 0 || c.TargetLoad > 1 {
		c.TargetLoad = defaultTargetLoad
	}
	if c.EmptyTimeout <= 0 {
		c.EmptyTimeout = defaultEmptyTimeout
	}
	if c.AgentName == "" {
		c.AgentName = defaultAgentName
	}
	if c.TokenFailureBurst <= 0 {
		c.TokenFailureBurst = defaultFailureBurst
	}
	if c.TokenFailureEvery <= 0 {
		c.TokenFailureEvery = defaultFailureEvery
	}
	if c.AssumeAfter <= 0 {
		c.AssumeAfter = defaultAssumeAfter
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = defaultLeaseTTL
	}
}

// httpURL is the LiveKit server's API URL.
func (c *Config) httpURL() string {
	u, err := url.Parse(c.LiveKitURL)
	if err != nil {
		return c.LiveKitURL
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	return u.String()
}
