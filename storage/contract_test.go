package storage_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
)

// A contract run opens a store to write to; its settle flushes and
// returns a store reading from the same place (for Postgres a fresh store
// on the same database, so nothing is answered from a cache).
type contractStores func(t *testing.T) (s storage.Store, settle func() storage.Store)

func contractBackends() map[string]contractStores {
	return map[string]contractStores{
		"memory": func(*testing.T) (storage.Store, func() storage.Store) {
			m := storage.NewMemory(storage.ReasoningPlain)
			return m, func() storage.Store { return m }
		},
		"postgres": func(t *testing.T) (storage.Store, func() storage.Store) {
			url := testenv.Database(t)
			p := open(t, url, storage.ReasoningPlain, nil)
			return p, func() storage.Store {
				flush(t, p)
				return open(t, url, storage.ReasoningPlain, nil)
			}
		},
	}
}

// TestStoreContract runs the same expectations against every store, so
// the in-memory store and Postgres cannot disagree again.
func TestStoreContract(t *testing.T) {
	for name, b := range contractBackends() {
		t.Run(name, func(t *testing.T) {
			t.Run("message ids are per conversation", func(t *testing.T) { contractMessageIDs(t, b) })
			t.Run("a message saved again is updated in place", func(t *testing.T) { contractUpdate(t, b) })
			t.Run("envelopes and stanzas", func(t *testing.T) { contractEnvelopes(t, b) })
			t.Run("preferences and unknown conversations", func(t *testing.T) { contractMisc(t, b) })
		})
	}
}

func render(h []storage.Entry) []string {
	var out []string
	for _, e := range h {
		out = append(out, fmt.Sprintf("%s %s %s %q %s", e.ConversationID, e.ID, e.Role, e.Content, e.Status))
		for _, s := range e.Steps {
			line := fmt.Sprintf("  %d %s", s.Index, s.Content)
			if s.CutShort {
				line += " (cut short)"
			}
			out = append(out, line)
		}
	}
	return out
}

func expectHistory(t *testing.T, s storage.Store, conv string, want ...string) {
	t.Helper()
	h, err := s.History(context.Background(), conv)
	if err != nil {
		t.Fatal(err)
	}
	if got := render(h); !slices.Equal(got, want) {
		t.Fatalf("history of %s\n%s\nwant\n%s", conv, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Two clients each choose the id m1 for their first message: both
// conversations keep their own, with their own answers and steps.
func contractMessageIDs(t *testing.T, b contractStores) {
	s, settle := b(t)
	now := time.Now()
	for i, conv := range []string{"conv_one", "conv_two"} {
		s.SaveConversation(storage.Conversation{ID: conv, Owner: "user" + conv, CreatedAt: now})
		s.SaveMessage(storage.Message{ID: "m1", ConversationID: conv, Role: "user", Content: "question of " + conv, CreatedAt: now})
		s.SaveMessage(storage.Message{ID: "a1", ConversationID: conv, PreviousID: "m1", Role: "assistant", Status: storage.StatusStreaming, CreatedAt: now.Add(time.Millisecond)})
		for j := range 2 {
			s.SaveStep(reasoning.Step{ID: fmt.Sprintf("step-%d-%d", i, j), ConversationID: conv, PreviousID: "m1", MessageID: "a1",
				Index: int32(j + 1), Content: fmt.Sprintf("thought %d of %s", j+1, conv), StartedAt: now, EndedAt: now, CutShort: j == 1})
		}
		s.SaveMessage(storage.Message{ID: "a1", ConversationID: conv, PreviousID: "m1", Role: "assistant", Content: "answer of " + conv, Status: storage.StatusComplete, CreatedAt: now.Add(time.Millisecond)})
	}
	s = settle()
	for _, conv := range []string{"conv_one", "conv_two"} {
		expectHistory(t, s, conv,
			conv+` m1 user "question of `+conv+`" complete`,
			conv+` a1 assistant "answer of `+conv+`" complete`,
			"  1 thought 1 of "+conv, "  2 thought 2 of "+conv+" (cut short)")
	}
}

func contractUpdate(t *testing.T, b contractStores) {
	s, settle := b(t)
	now := time.Now()
	s.SaveConversation(storage.Conversation{ID: "c", Owner: "o", CreatedAt: now})
	s.SaveMessage(storage.Message{ID: "u", ConversationID: "c", Role: "user", Content: "q", CreatedAt: now})
	s.SaveMessage(storage.Message{ID: "a", ConversationID: "c", PreviousID: "u", Role: "assistant", Status: storage.StatusStreaming, CreatedAt: now.Add(time.Millisecond)})
	// The final save comes with a later time; the answer keeps its place.
	s.SaveMessage(storage.Message{ID: "a", ConversationID: "c", PreviousID: "u", Role: "assistant", Content: "done", Status: storage.StatusStopped, CreatedAt: now.Add(time.Hour)})
	s.SaveMessage(storage.Message{ID: "u2", ConversationID: "c", PreviousID: "a", Role: "user", Content: "q2", CreatedAt: now.Add(2 * time.Millisecond)})
	s = settle()
	expectHistory(t, s, "c", `c u user "q" complete`, `c a assistant "done" stopped`, `c u2 user "q2" complete`)
}

func contractEnvelopes(t *testing.T, b contractStores) {
	s, settle := b(t)
	ctx := context.Background()
	for _, conv := range []string{"c1", "c2"} {
		s.SaveConversation(storage.Conversation{ID: conv, Owner: "o"})
	}
	for i := int32(1); i <= 4; i++ {
		var to []string
		if i == 2 {
			to = []string{"bob"}
		}
		s.SaveEnvelope(storage.Envelope{ConversationID: "c1", StanzaID: -i, Payload: []byte{byte(i)}, To: to})
	}
	s.SaveEnvelope(storage.Envelope{ConversationID: "c2", StanzaID: -9, Payload: []byte{9}})
	s = settle()
	envs, err := s.Envelopes(ctx, "c1", 1, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	for _, e := range envs {
		got = append(got, e.StanzaID)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int32{-4, -3}) {
		t.Fatalf("alice resumes c1 after 1 with %v, want -4 -3", got)
	}
	// Reservations count per conversation and never hand a number out twice.
	for _, r := range []struct {
		conv        string
		n, wantFrom int32
	}{{"c3", 5, 1}, {"c4", 2, 1}, {"c3", 5, 6}, {"c4", 1, 3}} {
		if first, err := s.ReserveStanzas(ctx, r.conv, r.n); err != nil || first != r.wantFrom {
			t.Fatalf("ReserveStanzas(%s, %d) = %d, %v; want %d", r.conv, r.n, first, err, r.wantFrom)
		}
	}
}

func contractMisc(t *testing.T, b contractStores) {
	s, settle := b(t)
	ctx := context.Background()
	if m, err := s.Mode(ctx, "nobody"); err != nil || m != reasoning.ModeUnset {
		t.Fatalf("a user with no preference: %s, %v", m, err)
	}
	if err := s.SetMode(ctx, "alice", reasoning.ModeFull); err != nil {
		t.Fatal(err)
	}
	s = settle()
	if m, err := s.Mode(ctx, "alice"); err != nil || m != reasoning.ModeFull {
		t.Fatalf("alice's preference: %s, %v", m, err)
	}
	if _, err := s.Conversation(ctx, "nope"); err != storage.ErrNotFound {
		t.Fatalf("unknown conversation: %v", err)
	}
	if _, err := s.History(ctx, "nope"); err != storage.ErrNotFound {
		t.Fatalf("history of an unknown conversation: %v", err)
	}
}
