package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/internal/testenv"
)

// flightConn counts round trips on a connection to Postgres: a write
// after the server has answered starts a new one.
type flightConn struct {
	net.Conn
	flights *atomic.Int64

	mu       sync.Mutex
	answered bool
}

func (c *flightConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.answered {
		c.flights.Add(1)
		c.answered = false
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *flightConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		c.answered = true
		c.mu.Unlock()
	}
	return n, err
}

// countingPool opens a migrated database whose pool counts its round
// trips. It holds one connection, so that the statements a first use
// prepared are there for the next (as on a running server), and it does
// not ping a connection idle for a second before handing it out: that
// check is the pool's, not the store's, and would depend on the
// machine's speed.
func countingPool(t *testing.T) (*pgxpool.Pool, *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	flights := &atomic.Int64{}
	var d net.Dialer
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &flightConn{Conn: c, flights: flights, answered: true}, nil
	}
	cfg.MaxConns = 1
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := Migrate(ctx, pool, "up"); err != nil {
		t.Fatal(err)
	}
	return pool, flights
}

func testWriter(t *testing.T, pool *pgxpool.Pool) *writer {
	t.Helper()
	w := newWriter(pool, slog.New(slog.DiscardHandler), 1000, -1, "", nil)
	testenv.CleanupWithin(t, time.Minute, func(ctx context.Context) { w.close(ctx) })
	return w
}

// turnRecords is what one text turn queues, in the order it does: the
// conversation, the user's message, the answer saved as it starts, three
// reasoning steps, the answer saved again as it grows and once complete,
// and ten envelopes (one addressed to a single member).
func turnRecords(conv string, at time.Time) []record {
	user, answer := conv+"-u", conv+"-a"
	out := []record{
		{conv: &Conversation{ID: conv, Owner: "alice", CreatedAt: at}, enqueued: at},
		{msg: &Message{ID: user, ConversationID: conv, Role: "user", Content: "question", Status: StatusComplete, CreatedAt: at}, enqueued: at},
	}
	versions := []struct{ content, status string }{{"", StatusStreaming}, {"The answer", StatusStreaming}, {"The answer, whole.", StatusComplete}}
	msg := func(v int) record {
		return record{msg: &Message{ID: answer, ConversationID: conv, PreviousID: user, Role: "assistant", Content: versions[v].content,
			Status: versions[v].status, CreatedAt: at.Add(time.Millisecond)}, enqueued: at.Add(time.Duration(v+1) * time.Millisecond)}
	}
	out = append(out, msg(0))
	for i := range 3 {
		content := fmt.Sprintf("thought %d", i+1)
		out = append(out, record{step: &stepRow{id: fmt.Sprintf("%s-s%d", conv, i), conversationID: conv, messageID: answer, previousID: user,
			index: int32(i + 1), content: &content, cutShort: i == 2, startedAt: at, endedAt: at.Add(time.Duration(i) * time.Millisecond)}})
	}
	out = append(out, msg(1), msg(2))
	for i := int32(1); i <= 10; i++ {
		var to []string
		if i == 4 {
			to = []string{"bob"}
		}
		out = append(out, record{env: &envRow{Envelope: Envelope{ConversationID: conv, StanzaID: -i, Payload: []byte{byte(i)}, To: to, SentAt: at}}})
	}
	return out
}

// A turn's writes reach Postgres in one round trip, and its history comes
// back in one: before, a batch took three (BEGIN, the batch, COMMIT) and
// the history three queries.
func TestOneRoundTripPerBatchAndPerHistory(t *testing.T) {
	ctx := context.Background()
	pool, flights := countingPool(t)
	w := testWriter(t, pool)
	p := &Postgres{pool: pool, w: w, mode: ReasoningPlain}
	at := time.Now()
	// A first turn and history prepare the statements on the connection.
	if err := w.write(turnRecords("warm", at)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.History(ctx, "warm"); err != nil {
		t.Fatal(err)
	}

	before := flights.Load()
	if err := w.write(turnRecords("conv", at)); err != nil {
		t.Fatal(err)
	}
	if n := flights.Load() - before; n != 1 {
		t.Errorf("a turn's writes took %d round trips, want 1", n)
	}
	before = flights.Load()
	h, err := p.History(ctx, "conv")
	if err != nil {
		t.Fatal(err)
	}
	if n := flights.Load() - before; n != 1 {
		t.Errorf("a history took %d round trips, want 1", n)
	}
	var got []string
	for _, e := range h {
		got = append(got, fmt.Sprintf("%s %s %q %s", e.ID, e.Role, e.Content, e.Status))
		for _, s := range e.Steps {
			got = append(got, fmt.Sprintf("  %d %s %s cut=%v", s.Index, s.ID, s.Content, s.CutShort))
		}
	}
	want := []string{`conv-u user "question" complete`, `conv-a assistant "The answer, whole." complete`,
		"  1 conv-s0 thought 1 cut=false", "  2 conv-s1 thought 2 cut=false", "  3 conv-s2 thought 3 cut=true"}
	if !slices.Equal(got, want) {
		t.Fatalf("history\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The one query still tells an unknown conversation from an empty one.
	if err := w.write([]record{{conv: &Conversation{ID: "empty", Owner: "o", CreatedAt: at}}}); err != nil {
		t.Fatal(err)
	}
	if h, err := p.History(ctx, "empty"); err != nil || len(h) != 0 {
		t.Fatalf("history of a conversation without messages: %v, %v", h, err)
	}
	if _, err := p.History(ctx, "nope"); err != ErrNotFound {
		t.Fatalf("history of an unknown conversation: %v", err)
	}
}

// dump is every stored row, as Postgres prints it.
func dump(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var out []string
	for _, table := range []string{"alicia_conversations", "alicia_messages", "alicia_reasoning_steps", "alicia_envelopes"} {
		rows, err := pool.Query(context.Background(), `SELECT t::text FROM `+table+` t ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, table+":")
		out = append(out, lines...)
	}
	return strings.Join(out, "\n")
}

// A batch that names the same row several times (an answer saved as it
// grows, a conversation saved each turn, a step or an envelope queued
// again) leaves exactly the rows that writing its records one at a time
// leaves, whatever was stored before.
func TestBatchLeavesWhatRecordsOneByOneLeave(t *testing.T) {
	at := time.Now().Truncate(time.Microsecond)
	first := []record{
		{conv: &Conversation{ID: "c", Owner: "alice", CreatedAt: at}},
		{msg: &Message{ID: "u", ConversationID: "c", Role: "user", Content: "q", Status: StatusComplete, CreatedAt: at}, enqueued: at},
		{msg: &Message{ID: "edited", ConversationID: "c", Role: "user", Content: "old", Status: StatusComplete, ReplacedByID: "r0", CreatedAt: at}, enqueued: at},
	}
	later := func(d time.Duration) time.Time { return at.Add(d * time.Millisecond) }
	content := func(s string) *string { return &s }
	second := []record{
		{conv: &Conversation{ID: "c", Owner: "mallory", CreatedAt: later(5)}},
		{conv: &Conversation{ID: "c", Owner: "eve", CreatedAt: later(3)}},
		{conv: &Conversation{ID: "d", Owner: "bob", CreatedAt: later(1)}},
		{conv: &Conversation{ID: "d", Owner: "carol", CreatedAt: later(9)}},
		{msg: &Message{ID: "a", ConversationID: "c", PreviousID: "u", Role: "assistant", Status: StatusStreaming, CreatedAt: later(1)}, enqueued: later(1)},
		{msg: &Message{ID: "a", ConversationID: "c", PreviousID: "other", Role: "assistant", Content: "par", Status: StatusStreaming,
			VariantOf: "v", ReplacedByID: "x", CreatedAt: later(7)}, enqueued: later(2)},
		{msg: &Message{ID: "a", ConversationID: "c", PreviousID: "u", Role: "assistant", Content: "partial", Status: StatusStopped, CreatedAt: later(8)}, enqueued: later(4)},
		{msg: &Message{ID: "a", ConversationID: "d", Role: "user", Content: "same id, other conversation", Status: StatusComplete, CreatedAt: later(2)}, enqueued: later(2)},
		{msg: &Message{ID: "edited", ConversationID: "c", Role: "user", Content: "new", Status: StatusSuperseded, ReplacedByID: "r1", CreatedAt: later(6)}, enqueued: later(3)},
		{msg: &Message{ID: "edited", ConversationID: "c", Role: "user", Content: "newer", Status: StatusSuperseded, CreatedAt: later(6)}, enqueued: later(5)},
		{msg: &Message{ID: "edited", ConversationID: "c", Role: "user", Content: "newest", Status: StatusSuperseded, ReplacedByID: "r2", CreatedAt: later(6)}, enqueued: later(6)},
		{msg: &Message{ID: "edited", ConversationID: "c", Role: "user", Content: "last", Status: StatusSuperseded, CreatedAt: later(6)}, enqueued: later(7)},
		{step: &stepRow{id: "s1", conversationID: "c", messageID: "a", previousID: "u", index: 1, content: content("kept"), startedAt: at, endedAt: later(1)}},
		{step: &stepRow{id: "s1", conversationID: "c", messageID: "a", previousID: "u", index: 1, content: content("dropped"), startedAt: at, endedAt: later(2)}},
		{step: &stepRow{id: "s2", conversationID: "c", messageID: "a", previousID: "u", index: 2, sealed: []byte{1, 2, 3},
			encryptedValue: content("opaque"), toolCallID: content("call"), cutShort: true, startedAt: later(1), endedAt: later(2)}},
		{env: &envRow{Envelope: Envelope{ConversationID: "c", StanzaID: -1, Payload: []byte("kept"), SentAt: at}}},
		{env: &envRow{Envelope: Envelope{ConversationID: "c", StanzaID: -1, Payload: []byte("dropped"), To: []string{"x"}, SentAt: at}}},
		{env: &envRow{Envelope: Envelope{ConversationID: "c", StanzaID: -2, Payload: []byte("nobody"), To: []string{}, SentAt: at}}},
		{env: &envRow{Envelope: Envelope{ConversationID: "c", StanzaID: -3, Payload: []byte("two"), To: []string{"bob", `o'dd "one", {x}`}, SentAt: at}, encrypted: true}},
		{env: &envRow{Envelope: Envelope{ConversationID: "d", StanzaID: -1, Payload: []byte("other conversation"), To: []string{"carol"}, SentAt: at}}},
	}
	ctx := context.Background()
	batched, _ := countingPool(t)
	oneByOne, _ := countingPool(t)
	wb, w1 := testWriter(t, batched), testWriter(t, oneByOne)
	for _, batch := range [][]record{first, second} {
		if err := wb.commit(ctx, batch); err != nil {
			t.Fatal(err)
		}
		for _, r := range batch {
			if err := w1.commit(ctx, []record{r}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := dump(t, batched), dump(t, oneByOne); got != want {
		t.Fatalf("batched:\n%s\none record at a time:\n%s", got, want)
	}
}

// A batch commits whole or not at all: a row Postgres refuses undoes the
// rows before it, so that the writer can retry it or split it.
func TestBatchIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	pool, _ := countingPool(t)
	w := testWriter(t, pool)
	content := "index 0 breaks a CHECK"
	err := w.commit(ctx, []record{
		{conv: &Conversation{ID: "c", Owner: "o", CreatedAt: time.Now()}},
		{msg: &Message{ID: "u", ConversationID: "c", Role: "user", Status: StatusComplete, CreatedAt: time.Now()}},
		{step: &stepRow{id: "bad", conversationID: "c", messageID: "a", previousID: "u", index: 0, content: &content, startedAt: time.Now(), endedAt: time.Now()}},
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Fatalf("a batch with a step of index 0: %v, want a check violation", err)
	}
	if d := dump(t, pool); d != "alicia_conversations:\nalicia_messages:\nalicia_reasoning_steps:\nalicia_envelopes:" {
		t.Fatalf("rows left by a refused batch:\n%s", d)
	}
	// The writer's own path then writes the rest record by record.
	if err := w.write([]record{
		{conv: &Conversation{ID: "c", Owner: "o", CreatedAt: time.Now()}},
		{step: &stepRow{id: "bad", conversationID: "c", messageID: "a", previousID: "u", index: 0, content: &content, startedAt: time.Now(), endedAt: time.Now()}},
	}); err != nil {
		t.Fatal(err)
	}
	if d := dump(t, pool); !strings.Contains(d, "(c,o,") || strings.Contains(d, "bad") {
		t.Fatalf("after the record-by-record fallback:\n%s", d)
	}
}
