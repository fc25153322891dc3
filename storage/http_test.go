package storage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
)

func TestHistoryEndpointServesTheOwnerOnly(t *testing.T) {
	const key, secret = "APItest", "a-secret-of-at-least-thirty-two-characters"
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var s storage.Store = storage.NewMemory(storage.ReasoningPlain)
			if backend == "postgres" {
				s = open(t, testenv.Database(t), storage.ReasoningPlain, nil)
			}
			turn(s, "conv_h", "alice", 1, 2, func(i, j int) string { return fmt.Sprintf("thought %d. And more.", j) })
			if p, ok := s.(*storage.Postgres); ok {
				// Reads see what the writer committed.
				testenv.Eventually(t, "the writes to become visible", func() bool {
					h, err := p.History(t.Context(), "conv_h")
					return err == nil && len(h) == 2 && len(h[1].Steps) == 2
				})
			}
			mux := http.NewServeMux()
			mux.Handle("GET /v1/conversations/{id}", storage.HistoryHandler(s, room.BearerIdentity(key, secret), func(ctx context.Context, id string) reasoning.Mode {
				m, _ := s.Mode(ctx, id)
				return m
			}, nil))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			get := func(identity string) (int, []byte) {
				req, _ := http.NewRequest("GET", srv.URL+"/v1/conversations/conv_h", nil)
				if identity != "" {
					tok, _ := auth.NewAccessToken(key, secret).SetIdentity(identity).SetValidFor(time.Minute).ToJWT()
					req.Header.Set("Authorization", "Bearer "+tok)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var body json.RawMessage
				_ = json.NewDecoder(resp.Body).Decode(&body)
				return resp.StatusCode, body
			}
			if code, _ := get(""); code != http.StatusUnauthorized {
				t.Errorf("no token: %d", code)
			}
			if code, _ := get("mallory"); code != http.StatusNotFound {
				t.Errorf("another user: %d", code)
			}
			type history struct {
				Messages []struct {
					ID, Role  string
					Reasoning []struct {
						StepIndex int
						Content   string
					}
				}
			}
			// The owner's show-reasoning mode decides what reasoning the
			// history holds, as it does live.
			for _, c := range []struct {
				mode  reasoning.Mode
				steps int
				step1 string
			}{{reasoning.ModeFull, 2, "thought 1. And more."}, {reasoning.ModeSummary, 2, "thought 1."}, {reasoning.ModeOff, 0, ""}} {
				if err := s.SetMode(t.Context(), "alice", c.mode); err != nil {
					t.Fatal(err)
				}
				code, body := get("alice")
				var h history
				if err := json.Unmarshal(body, &h); err != nil || code != 200 {
					t.Fatalf("owner: %d %s", code, body)
				}
				if len(h.Messages) != 2 || h.Messages[1].Role != "assistant" || len(h.Messages[1].Reasoning) != c.steps {
					t.Fatalf("%s: history %s", c.mode, body)
				}
				if c.steps > 0 && h.Messages[1].Reasoning[1].Content != c.step1 {
					t.Errorf("%s: step 2 reads %q, want %q", c.mode, h.Messages[1].Reasoning[1].Content, c.step1)
				}
			}
		})
	}
}
