package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/storage"
)

// Several people in one conversation: every store keeps who wrote each
// user message, and a message saved again without an author (marked
// superseded by an edit) keeps the one it had.
func TestStoreAuthor(t *testing.T) {
	for name, b := range contractBackends() {
		t.Run(name, func(t *testing.T) {
			s, settle := b(t)
			now := time.Now()
			s.SaveConversation(storage.Conversation{ID: "c", Owner: "alice", CreatedAt: now})
			s.SaveMessage(storage.Message{ID: "u1", ConversationID: "c", Role: "user", Author: "alice", Content: "q1", CreatedAt: now})
			s.SaveMessage(storage.Message{ID: "a1", ConversationID: "c", PreviousID: "u1", Role: "assistant", Content: "r1", CreatedAt: now.Add(time.Millisecond)})
			s.SaveMessage(storage.Message{ID: "u2", ConversationID: "c", Role: "user", Author: "bob", Content: "q2", CreatedAt: now.Add(2 * time.Millisecond)})
			s.SaveMessage(storage.Message{ID: "u2", ConversationID: "c", Role: "user", Content: "q2", Status: storage.StatusSuperseded, ReplacedByID: "u3", CreatedAt: now.Add(2 * time.Millisecond)})
			s = settle()
			h, err := s.History(context.Background(), "c")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range h {
				got = append(got, e.ID+":"+e.Author)
			}
			want := []string{"u1:alice", "a1:", "u2:bob"}
			if len(got) != len(want) {
				t.Fatalf("authors %v, want %v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("authors %v, want %v", got, want)
				}
			}
			if h[2].Status != storage.StatusSuperseded {
				t.Fatalf("u2 %+v: the second save was lost", h[2])
			}
		})
	}
}
