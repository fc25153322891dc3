package pipeline_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// readCounting counts the history reads of a Postgres store.
type readCounting struct {
	*storage.Postgres
	reads atomic.Int32
}

func (s *readCounting) History(ctx context.Context, id string) ([]storage.Entry, error) {
	s.reads.Add(1)
	return s.Postgres.History(ctx, id)
}

// The process serving a conversation reads its history from Postgres
// once, not at every turn; a turn another process takes on it is
// announced, and the next turn here reads again and sees it.
func TestHistoryReadOnceUntilAnotherProcessWrites(t *testing.T) {
	url := testenv.Database(t)
	open := func() *storage.Postgres {
		p, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(context.Background()) })
		// Until its listener is connected a store cannot tell, and the
		// history is read at every turn.
		testenv.Eventually(t, "the store listening", func() bool { _, ok := p.HistoryVersion("conv_pg"); return ok })
		return p
	}
	here := &readCounting{Postgres: open()}
	there := open()
	m := newModel(plain)
	c := pipeline.NewEngine(pipeline.Config{LLM: m, Thinking: true}, here).Open("conv_pg")
	t.Cleanup(c.Close)
	thereBefore, _ := there.HistoryVersion("conv_pg")
	here.SaveConversation(storage.Conversation{ID: "conv_pg", Owner: "alice", CreatedAt: time.Now()})
	face := newFace(streamingFull)
	ask := func(c *pipeline.Conversation, face *fakeFace, stanza int32, text string) {
		t.Helper()
		c.Handle(face, pipeline.Inbound{From: "alice", StanzaID: stanza, Body: &wire.UserMessage{ID: "msg_" + text, ConversationID: "conv_pg", Content: text}, Received: time.Now()})
		face.until(t, "the answer to "+text, func(b []sentBody) bool { return strings.Contains(answerOf(b), text) })
	}
	for i, q := range []string{"first", "second"} {
		ask(c, face, int32(i+1), q)
	}
	// This process's own writes are announced too, and ignored here: once
	// the other store heard them, and then this one heard a later write of
	// the other's (announcements arrive in commit order), the next turn
	// still reads nothing.
	testenv.Eventually(t, "this process's turns announced", func() bool { w, _ := there.HistoryVersion("conv_pg"); return w != thereBefore })
	xBefore, _ := here.HistoryVersion("conv_x")
	there.SaveConversation(storage.Conversation{ID: "conv_x", Owner: "bob", CreatedAt: time.Now()})
	there.SaveMessage(storage.Message{ID: "m_x", ConversationID: "conv_x", Role: "user", Content: "elsewhere", Status: storage.StatusComplete})
	testenv.Eventually(t, "the other process's write announced", func() bool { w, _ := here.HistoryVersion("conv_x"); return w != xBefore })
	ask(c, face, 3, "third")
	if n := here.reads.Load(); n != 1 {
		t.Fatalf("history read %d times in three turns", n)
	}

	// A turn another process takes on this conversation is read here.
	v, _ := here.HistoryVersion("conv_pg")
	other := pipeline.NewEngine(pipeline.Config{LLM: newModel(plain), Thinking: true}, there).Open("conv_pg")
	t.Cleanup(other.Close)
	ask(other, newFace(streamingFull), 1, "elsewhere")
	testenv.Eventually(t, "the other process's turn announced", func() bool { w, _ := here.HistoryVersion("conv_pg"); return w != v })
	ask(c, face, 4, "fourth")
	var users []string
	for _, msg := range m.request(3).Messages {
		if msg.Role == llm.RoleUser {
			users = append(users, msg.Content)
		}
	}
	if got := strings.Join(users, ","); got != "first,second,third,elsewhere,fourth" {
		t.Fatalf("the fourth turn saw %s", got)
	}
	if n := here.reads.Load(); n != 2 {
		t.Fatalf("history read %d times, want 2", n)
	}
}
