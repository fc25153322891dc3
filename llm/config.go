package llm

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config chooses and reaches a backend.
type Config struct {
	// Backend: "openai" (any OpenAI-compatible server), "ollama" (Ollama's
	// native API) or "agui" (an AG-UI agent).
	Backend string
	// URL: the OpenAI base URL including /v1, Ollama's root URL, or the
	// AG-UI agent's endpoint.
	URL    string
	Model  string
	APIKey string
	// Flavor of an OpenAI-compatible server; empty means guessed from URL.
	Flavor Flavor
	// ThinkOpenInPrompt says the model's template opens <think> in the
	// prompt, so that raw output has only "</think>". It is implied by
	// model names of Qwen3 Thinking-2507 and Qwen3.5.
	ThinkOpenInPrompt bool
	// IdleTimeout ends a stream that sends nothing for this long (no
	// whole-request timeout exists). Default 60 s.
	IdleTimeout time.Duration
	// HTTPClient defaults to a client without a timeout.
	HTTPClient *http.Client
}

// Flags registers the configuration's flags on fs (llm-backend,
// llm-url, llm-model, llm-api-key, llm-flavor, llm-think-open,
// llm-idle-timeout; serve reads each from ALICIA_LLM_… too).
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.Backend, "llm-backend", "openai", "openai (any OpenAI-compatible server), ollama (native API) or agui")
	fs.StringVar(&c.URL, "llm-url", "", "the model server (the OpenAI base URL includes /v1); empty: the built-in stand-in")
	fs.StringVar(&c.Model, "llm-model", "", "the model name the server serves")
	fs.StringVar(&c.APIKey, "llm-api-key", "", "the model server's API key")
	fs.Func("llm-flavor", "generic, dashscope, ollama or openrouter; guessed from the URL when unset", func(v string) error {
		c.Flavor = Flavor(v)
		return nil
	})
	fs.BoolVar(&c.ThinkOpenInPrompt, "llm-think-open", false, "the model's template opens <think> in the prompt (implied by Thinking-2507 and Qwen3.5 names)")
	fs.DurationVar(&c.IdleTimeout, "llm-idle-timeout", 60*time.Second, "how long a silent model stream may last")
}

// New returns the client for a configuration.
func New(c Config) (Client, error) {
	if c.URL == "" {
		return nil, fmt.Errorf("llm: no URL for the %s backend", c.Backend)
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("llm: invalid URL %q", c.URL)
	}
	h := httpBackend{client: c.HTTPClient, baseURL: c.URL, apiKey: c.APIKey, idle: c.IdleTimeout}
	if h.client == nil {
		h.client = &http.Client{}
	}
	if h.idle <= 0 {
		h.idle = 60 * time.Second
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
		return &openAI{http: h, model: c.Model, flavor: flavor, forcedOpen: c.ThinkOpenInPrompt}, nil
	case "ollama":
		return &ollamaNative{http: h, model: c.Model, forcedOpen: c.ThinkOpenInPrompt}, nil
	case "agui":
		return &aguiAgent{http: h, forcedOpen: c.ThinkOpenInPrompt}, nil
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

// FlavorOf reports the flavor an OpenAI-compatible client settled on, or
// "" for other backends; start-up logs say it.
func FlavorOf(c Client) Flavor {
	if o, ok := c.(*openAI); ok {
		return o.flavor
	}
	return ""
}
