package llm

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/internal/failover"
)

// Config chooses and reaches a backend.
type Config struct {
	// Backend: "openai" (any OpenAI-compatible server), "ollama" (Ollama's
	// native API) or "agui" (an AG-UI agent).
	Backend string
	// URL: the OpenAI base URL including /v1, Ollama's root URL, or the
	// AG-UI agent's endpoint; or several, comma-separated, in order of
	// preference: the next serves while one is down. They share the
	// backend, flavor, model and key.
	URL    string
	Model  string
	APIKey string
	// Flavor of an OpenAI-compatible server; empty means guessed from URL.
	Flavor Flavor
	// ThinkOpenInPrompt says the model's template opens <think> in the
	// prompt, so that raw output has only "</think>". Without it the
	// client finds out: from the model's name (Qwen3 Thinking-2507,
	// Qwen3.5), else by asking the backend what it serves, else from the
	// first bare "</think>" the model writes.
	ThinkOpenInPrompt bool
	// IdleTimeout ends a stream that sends nothing for this long (no
	// whole-request timeout exists). Default 60 s.
	IdleTimeout time.Duration
	// FirstByteTimeout is how long a server of several may take to send
	// the first byte of its answer before the next one is asked. Default
	// 15 s; the last server tried waits under IdleTimeout alone.
	FirstByteTimeout time.Duration
	// CoolOff is how long a failed server is skipped, doubling with each
	// failure in a row up to five minutes. Default 30 s.
	CoolOff time.Duration
	Logger  *slog.Logger
	// HTTPClient defaults to a client without a timeout.
	HTTPClient *http.Client
}

// Flags registers the configuration's flags on fs (llm-backend,
// llm-url, llm-model, llm-api-key, llm-flavor, llm-think-open,
// llm-idle-timeout; serve reads each from ALICIA_LLM_… too).
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.Backend, "llm-backend", "openai", "openai (any OpenAI-compatible server), ollama (native API) or agui")
	fs.StringVar(&c.URL, "llm-url", "", "the model server (the OpenAI base URL includes /v1), or several, comma-separated, in order of preference; empty: the built-in stand-in")
	fs.StringVar(&c.Model, "llm-model", "", "the model name the server serves")
	fs.StringVar(&c.APIKey, "llm-api-key", "", "the model server's API key")
	fs.Func("llm-flavor", "generic, dashscope, ollama or openrouter; guessed from the URL when unset", func(v string) error {
		c.Flavor = Flavor(v)
		return nil
	})
	fs.BoolVar(&c.ThinkOpenInPrompt, "llm-think-open", false, "the model's template opens <think> in the prompt (implied by Thinking-2507 and Qwen3.5 names)")
	fs.DurationVar(&c.IdleTimeout, "llm-idle-timeout", DefaultIdleTimeout, "how long a silent model stream may last")
	fs.DurationVar(&c.FirstByteTimeout, "llm-first-byte-timeout", DefaultFirstByteTimeout, "with several model servers, how long one may take to start its answer before the next is asked")
}

// DefaultFirstByteTimeout bounds the wait for a model server's first
// byte when another could serve instead. Streaming servers send their
// first chunk once the prompt is read and the first token (often a
// reasoning one) is out: well under a second on an idle GPU, several
// seconds for a long conversation on a busy one. 15 s leaves room for
// that and for a queue, and still moves on from a hung server long
// before the idle timeout would.
const DefaultFirstByteTimeout = 15 * time.Second

// DefaultIdleTimeout ends a model stream silent this long (IdleTimeout).
const DefaultIdleTimeout = 60 * time.Second

// New returns the client for a configuration.
func New(c Config) (Client, error) {
	urls := failover.Split(c.URL)
	if len(urls) == 0 {
		return nil, fmt.Errorf("llm: no URL for the %s backend", c.Backend)
	}
	var u *url.URL
	for i, raw := range urls {
		p, err := url.Parse(raw)
		if err != nil || p.Host == "" {
			return nil, fmt.Errorf("llm: invalid URL %q", raw)
		}
		if i == 0 {
			u = p
		}
	}
	if c.FirstByteTimeout <= 0 {
		c.FirstByteTimeout = DefaultFirstByteTimeout
	}
	h := httpBackend{client: c.HTTPClient, baseURL: urls[0], apiKey: c.APIKey, idle: c.IdleTimeout,
		servers: failover.New("llm", urls, failover.Config{FirstByte: c.FirstByteTimeout, CoolOff: c.CoolOff, Logger: c.Logger})}
	if h.client == nil {
		h.client = &http.Client{}
	}
	if h.idle <= 0 {
		h.idle = DefaultIdleTimeout
	}
	switch c.Backend {
	case "openai":
		flavor := c.Flavor
		if flavor == "" {
			flavor = guessFlavor(u)
		}
		switch flavor {
		case FlavorGeneric, FlavorDashScope, FlavorOllama, FlavorOpenRouter:
		default:
			return nil, fmt.Errorf("llm: unknown flavor %q (generic, dashscope, ollama, openrouter)", flavor)
		}
		o := &openAI{http: h, model: c.Model, flavor: flavor}
		o.know = newModelKnowledge(c.ThinkOpenInPrompt, c.Model, o.http.probeServers(func(ctx context.Context, b *httpBackend) int32 {
			return probeOpenAI(b, c.Model, flavor)(ctx)
		}))
		return o, nil
	case "ollama":
		o := &ollamaNative{http: h, model: c.Model}
		o.know = newModelKnowledge(c.ThinkOpenInPrompt, c.Model, o.http.probeServers(func(ctx context.Context, b *httpBackend) int32 {
			return probeOllamaShow(ctx, b, strings.TrimRight(b.baseURL, "/"), o.model)
		}))
		return o, nil
	case "agui":
		// An AG-UI agent labels reasoning itself; only configuration
		// says otherwise.
		know := newModelKnowledge(c.ThinkOpenInPrompt, "", nil)
		if !c.ThinkOpenInPrompt {
			know.state.Store(thinkPlain)
		}
		return &aguiAgent{http: h, know: know}, nil
	}
	return nil, fmt.Errorf("llm: unknown backend %q (openai, ollama, agui)", c.Backend)
}

// guessFlavor recognises the hosted services by host name and Ollama by
// its port or a path segment (a reverse proxy's /ollama/v1).
func guessFlavor(u *url.URL) Flavor {
	host := strings.ToLower(u.Hostname())
	path := "/" + strings.ToLower(strings.Trim(u.Path, "/")) + "/"
	switch {
	case strings.Contains(host, "dashscope") || strings.Contains(path, "/dashscope/"):
		return FlavorDashScope
	case strings.Contains(host, "openrouter") || strings.Contains(path, "/openrouter/"):
		return FlavorOpenRouter
	case u.Port() == "11434" || strings.Contains(path, "/ollama/"):
		return FlavorOllama
	}
	return FlavorGeneric
}

// Servers is the client's servers and what is known of each, for
// /readyz: every client New returns is a failover.Served.
func (o *openAI) Servers() *failover.Pool       { return o.http.servers }
func (o *ollamaNative) Servers() *failover.Pool { return o.http.servers }
func (a *aguiAgent) Servers() *failover.Pool    { return a.http.servers }

// FlavorOf reports the flavor an OpenAI-compatible client settled on, or
// "" for other backends; start-up logs say it.
func FlavorOf(c Client) Flavor {
	if o, ok := c.(*openAI); ok {
		return o.flavor
	}
	return ""
}
