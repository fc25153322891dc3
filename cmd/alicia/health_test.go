package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/testenv"
)

// /readyz and `alicia health` report ready while serve is registered with
// LiveKit and its database answers, and not ready, naming LiveKit, once
// LiveKit is gone.
func TestReadiness(t *testing.T) {
	t.Setenv("ALICIA_DATABASE_URL", testenv.Database(t))
	t.Setenv("ALICIA_LLM_URL", "http://127.0.0.1:1/v1") // never asked here
	lk, addr := startServe(t)
	rep := waitReadyz(t, addr, "ready", http.StatusOK)
	if rep.Checks["livekit"] != "ok" || rep.Checks["database"] != "ok" || !rep.Ready {
		t.Fatalf("ready without every check: %+v", rep)
	}
	if err := runHealth(context.Background(), []string{"-http-addr", addr}, nil, io.Discard, io.Discard); err != nil {
		t.Fatalf("alicia health while ready: %v", err)
	}

	lk.Kill()
	rep = waitReadyz(t, addr, "not ready", http.StatusServiceUnavailable)
	if rep.Ready || rep.Checks["livekit"] == "ok" || rep.Checks["database"] != "ok" {
		t.Fatalf("not ready for the wrong reason: %+v", rep)
	}
	if err := runHealth(context.Background(), []string{"-http-addr", addr}, nil, io.Discard, io.Discard); err == nil {
		t.Fatal("alicia health passed without LiveKit")
	}
}

// startServe runs serve, with the environment the test set, against a
// livekit-server of its own until the test ends, and returns that server
// and the address of serve's HTTP API.
func startServe(t *testing.T) (*testenv.LiveKit, string) {
	lk := testenv.StartLiveKit(t)
	port, err := lkserver.FreePort("tcp")
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	t.Setenv("ALICIA_LIVEKIT_URL", lk.URL)
	t.Setenv("ALICIA_LIVEKIT_API_KEY", lk.APIKey)
	t.Setenv("ALICIA_LIVEKIT_API_SECRET", lk.APISecret)
	t.Setenv("ALICIA_HTTP_ADDR", addr)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- runServe(ctx, nil, nil, io.Discard, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return lk, addr
}

// waitReadyz polls /readyz until it answers with status (polling a
// server's answer, not proving an absence) and returns its report.
func waitReadyz(t *testing.T, addr, what string, status int) readyReport {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, rep := 0, readyReport{}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&rep)
			resp.Body.Close()
			code = resp.StatusCode
		}
		if code == status {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last answer %d %+v", what, code, rep)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReadyURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8080":   "http://127.0.0.1:8080/readyz",
		":9000":          "http://127.0.0.1:9000/readyz",
		"[::]:8080":      "http://[::1]:8080/readyz",
		"10.0.0.5:81":    "http://10.0.0.5:81/readyz",
		"localhost:8080": "http://localhost:8080/readyz",
	} {
		if got, err := readyURL(addr); err != nil || got != want {
			t.Errorf("readyURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := readyURL("8080"); err == nil {
		t.Error("readyURL accepted an address without a port")
	}
}

// /readyz says, per kind, which server serves and lists the others; the
// servers do not decide readiness (text works with speech down, and a
// model server down is left for the next).
func TestReadinessReportsServers(t *testing.T) {
	t.Setenv("ALICIA_VOICE", "off")
	t.Setenv("ALICIA_LLM_URL", "http://127.0.0.1:1/v1, http://user:secret@127.0.0.1:2/v1") // never asked here
	_, addr := startServe(t)
	rep := waitReadyz(t, addr, "ready", http.StatusOK)
	llm := rep.Servers["llm"]
	if llm.Serving != "http://127.0.0.1:1/v1" || len(llm.Servers) != 2 || llm.Servers[0].State != "serving" || llm.Servers[1].State != "up" ||
		llm.Servers[1].URL != "http://user:xxxxx@127.0.0.1:2/v1" {
		t.Fatalf("servers %+v", rep.Servers)
	}
}
