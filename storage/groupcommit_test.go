package storage

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/internal/testenv"
)

// landings makes every committed conversation row announce itself, and
// returns a wait for the announcements of some: a barrier on their write
// having landed, on a connection of its own that the round trips do not
// count.
func landings(t *testing.T, pool *pgxpool.Pool) func(convs ...string) {
	t.Helper()
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `CREATE FUNCTION test_landed() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN PERFORM pg_notify('landed', NEW.id); RETURN NULL; END $$;
		CREATE TRIGGER test_landed AFTER INSERT OR UPDATE ON alicia_conversations FOR EACH ROW EXECUTE FUNCTION test_landed()`); err != nil {
		t.Fatal(err)
	}
	listener, err := pgx.Connect(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	testenv.CleanupWithin(t, time.Minute, func(ctx context.Context) { _ = listener.Close(ctx) })
	if _, err := listener.Exec(ctx, `LISTEN landed`); err != nil {
		t.Fatal(err)
	}
	return func(convs ...string) {
		t.Helper()
		waiting := map[string]bool{}
		for _, c := range convs {
			waiting[c] = true
		}
		for len(waiting) > 0 {
			n, err := listener.WaitForNotification(ctx)
			if err != nil {
				t.Fatalf("waiting for conversations %v to land: %v", convs, err)
			}
			delete(waiting, n.Payload)
		}
	}
}

// warmWriter is a writer with the given window whose connection has
// prepared the batch's statements already, as a running server's has.
func warmWriter(t *testing.T, window time.Duration) (*writer, *pgxpool.Pool, func() int64) {
	t.Helper()
	pool, flights := countingPool(t)
	w := newWriter(pool, slog.New(slog.DiscardHandler), 1000, window, "", nil)
	testenv.CleanupWithin(t, time.Minute, func(ctx context.Context) { w.close(ctx) })
	if err := w.write(turnRecords("warm", time.Now())); err != nil {
		t.Fatal(err)
	}
	return w, pool, flights.Load
}

// Turns of several conversations queued within the window go to Postgres
// in one round trip, and close sends them at once rather than waiting the
// window out (an hour here: the test would time out). Sent as they come,
// they took one round trip per wake of the writer.
func TestWindowSendsManyConversationsInOneRoundTrip(t *testing.T) {
	w, pool, flights := warmWriter(t, time.Hour)
	before := flights()
	// The first record finds the writer idle, as a quiet server's first
	// turn does; the others come meanwhile, from every conversation.
	turns := make([][]record, 5)
	for i := range turns {
		turns[i] = turnRecords(fmt.Sprintf("c%d", i), time.Now())
	}
	w.enqueue(turns[0][0])
	var wg sync.WaitGroup
	for i, turn := range turns {
		if i == 0 {
			turn = turn[1:]
		}
		wg.Go(func() {
			for _, r := range turn {
				w.enqueue(r)
			}
		})
	}
	wg.Wait()
	if left := w.close(t.Context()); left != 0 {
		t.Fatalf("%d records left unwritten", left)
	}
	if n := flights() - before; n != 1 {
		t.Errorf("5 conversations' turns took %d round trips, want 1", n)
	}
	var convs, msgs, steps, envs int
	if err := pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM alicia_conversations WHERE id <> 'warm'),
			(SELECT count(*) FROM alicia_messages WHERE conversation_id <> 'warm'),
			(SELECT count(*) FROM alicia_reasoning_steps WHERE conversation_id <> 'warm'),
			(SELECT count(*) FROM alicia_envelopes WHERE conversation_id <> 'warm')`).Scan(&convs, &msgs, &steps, &envs); err != nil {
		t.Fatal(err)
	}
	if convs != 5 || msgs != 10 || steps != 15 || envs != 50 {
		t.Errorf("stored %d conversations, %d messages, %d steps, %d envelopes; want 5, 10, 15, 50", convs, msgs, steps, envs)
	}
}

// A lone record goes when its window ends, with no other record or close
// to push it out; one round trip.
func TestWindowSendsALoneRecordWhenItEnds(t *testing.T) {
	w, pool, flights := warmWriter(t, 20*time.Millisecond)
	landed := landings(t, pool)
	before := flights()
	w.enqueue(record{conv: &Conversation{ID: "lone", Owner: "alice", CreatedAt: time.Now()}})
	landed("lone")
	if n := flights() - before; n != 1 {
		t.Errorf("a lone record took %d round trips, want 1", n)
	}
}

// A queue that fills a batch sends it without waiting out the window.
func TestWindowSendsAFullBatchAtOnce(t *testing.T) {
	w, pool, _ := warmWriter(t, time.Hour)
	landed := landings(t, pool)
	w.mu.Lock() // the writer reads it under mu
	w.batchSize = 3
	w.mu.Unlock()
	for _, id := range []string{"a", "b", "c"} {
		w.enqueue(record{conv: &Conversation{ID: id, Owner: "alice", CreatedAt: time.Now()}})
	}
	landed("a", "b", "c")
}
