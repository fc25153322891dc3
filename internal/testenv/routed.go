package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alicia-voice/alicia/llm/standin"
)

// RoutedModel is one model name, "assistant", served by a router in front
// of a 2504 hybrid and a Thinking-2507 deployment of the Qwen3 stand-in,
// both without a reasoning parser; Thinking says where the next request
// goes. It keeps every chat request's body as the servers received it.
type RoutedModel struct {
	URL      string
	Thinking atomic.Bool

	mu     sync.Mutex
	bodies []map[string]any
}

// NewRoutedModel starts the router and both deployments, answering with
// scenarios; they stop when the test ends.
func NewRoutedModel(t testing.TB, scenarios ...standin.Scenario) *RoutedModel {
	t.Helper()
	m := &RoutedModel{}
	backend := func(weights string) http.Handler {
		s, err := standin.New(scenarios, standin.Pacing{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Serve("assistant", weights)
		s.Recorded = func(_ *http.Request, body []byte) {
			var v map[string]any
			_ = json.Unmarshal(body, &v)
			m.mu.Lock()
			m.bodies = append(m.bodies, v)
			m.mu.Unlock()
		}
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		u, _ := url.Parse(ts.URL)
		p := httputil.NewSingleHostReverseProxy(u)
		p.FlushInterval = -1
		return p
	}
	hybrid, thinking := backend("Qwen/Qwen3-8B"), backend("Qwen/Qwen3-4B-Thinking-2507")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A router forwards chat completions only: nothing to ask.
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		// Forwarded only once read whole: the proxy's transport reads the
		// request's end (to find none past its length) as it may, after
		// the answer's headers are out, which is when this server closes
		// the request's body; a read failing then closes the connection
		// to the deployment in mid-answer (an answer cut short, 1 in a
		// few hundred turns on a busy machine).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if m.Thinking.Load() {
			thinking.ServeHTTP(w, r)
			return
		}
		hybrid.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	m.URL = ts.URL
	return m
}

// Last is the body of the last chat request.
func (m *RoutedModel) Last() map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bodies[len(m.bodies)-1]
}
