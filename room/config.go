package room

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
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
}

// Flags registers the configuration's flags on fs. There is no default
// key or secret: with no LiveKit URL, serve starts a livekit-server and
// makes its own; with one, Validate requires both.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.LiveKitURL, "livekit-url", "", "LiveKit server URL; empty starts a local livekit-server")
	fs.StringVar(&c.APIKey, "livekit-api-key", "", "LiveKit API key (required with -livekit-url)")
	fs.StringVar(&c.APISecret, "livekit-api-secret", "", "LiveKit API secret (required with -livekit-url)")
	fs.StringVar(&c.AgentName, "agent-name", "alicia", "agent name LiveKit dispatches; processes sharing it share the rooms")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:8080", "address of the HTTP API")
	fs.StringVar(&c.TokenSecret, "token-secret", "", "shared secret for POST /v1/token; default: the API secret")
	fs.IntVar(&c.MaxSessions, "max-sessions", 500, "conversations this process takes before it reports itself full")
	fs.Float64Var(&c.TargetLoad, "livekit-target-load", 0.7, "the livekit-server's agents.target_load: the load at which LiveKit stops dispatching")
	fs.DurationVar(&c.EmptyTimeout, "empty-timeout", 30*time.Second, "how long the bot stays in a room nobody is in")
}

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
		c.MaxSessions = 500
	}
	if c.TargetLoad <= 0 || c.TargetLoad > 1 {
		c.TargetLoad = 0.7
	}
	if c.EmptyTimeout <= 0 {
		c.EmptyTimeout = 30 * time.Second
	}
	if c.AgentName == "" {
		c.AgentName = "alicia"
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
