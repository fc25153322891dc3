package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/alicia-voice/alicia/internal/failover"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
)

// readiness is what GET /readyz checks: every part a conversation needs
// right now, each with its own verdict so an operator sees which failed.
// The model, recognition and synthesis servers are reported, not
// checked: a server down is skipped for the next, and with every speech
// server down text still works, so neither makes the process unready.
type readiness struct {
	agent   *room.Agent
	store   storage.Store
	servers []*failover.Pool
}

type readyReport struct {
	Ready    bool              `json:"ready"`
	Checks   map[string]string `json:"checks"`
	Duration string            `json:"duration"`
	// Servers says, per kind (llm, stt, tts), which server serves and
	// which are down.
	Servers map[string]failover.Status `json:"servers,omitempty"`
}

func (rd readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	rep := readyReport{Ready: true, Checks: map[string]string{}}
	check := func(name string, err error) {
		if err != nil {
			rep.Ready = false
			rep.Checks[name] = err.Error()
			return
		}
		rep.Checks[name] = "ok"
	}
	check("livekit", rd.agent.Ready())
	if p, ok := rd.store.(interface{ Ping(context.Context) error }); ok {
		check("database", p.Ping(ctx))
	}
	if rd.store.Saturated() {
		check("storage_queue", errors.New("write queue saturated; new turns are refused"))
	} else {
		check("storage_queue", nil)
	}
	for _, p := range rd.servers {
		if rep.Servers == nil {
			rep.Servers = map[string]failover.Status{}
		}
		rep.Servers[p.Kind()] = p.Status()
	}
	rep.Duration = time.Since(start).String()
	w.Header().Set("Content-Type", "application/json")
	if !rep.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(rep)
}

// poolsOf is the pools of those of vs that serve from one (a stand-in
// built by hand may not).
func poolsOf(vs ...any) []*failover.Pool {
	var out []*failover.Pool
	for _, v := range vs {
		if s, ok := v.(failover.Served); ok {
			out = append(out, s.Servers())
		}
	}
	return out
}

// runHealth asks a running serve's /readyz, for container health checks:
// the image has no shell or curl, so the binary checks itself.
func runHealth(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http-addr", envOr("ALICIA_HTTP_ADDR", room.DefaultHTTPAddr), "address of the HTTP API of the serve to check (ALICIA_HTTP_ADDR)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := readyURL(*addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_, _ = stdout.Write(body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready (%s)", resp.Status)
	}
	return nil
}

// readyURL turns a listen address into the URL to probe: a wildcard host
// (":8080", "0.0.0.0:8080") is reached on loopback.
func readyURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("http-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
