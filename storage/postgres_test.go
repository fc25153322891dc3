package storage_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
)

func open(t *testing.T, url string, mode storage.ReasoningMode, key []byte) *storage.Postgres {
	t.Helper()
	p, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: url, Reasoning: mode, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CleanupWithin(t, time.Minute, func(ctx context.Context) { _ = p.Close(ctx) })
	return p
}

func flush(t *testing.T, p *storage.Postgres) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func tables(t *testing.T, c *pgx.Conn) []string {
	rows, err := c.Query(context.Background(), `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name LIKE 'alicia_%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestMigrateUpDownUp(t *testing.T) {
	url := testenv.Database(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := connect(t, url)
	want := []string{"alicia_conversations", "alicia_envelopes", "alicia_messages", "alicia_reasoning_steps", "alicia_stanza_blocks", "alicia_user_preferences", "alicia_worker_leases"}
	for i, dir := range []string{"up", "down", "up"} {
		if err := storage.Migrate(ctx, pool, dir); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		got := tables(t, c)
		if dir == "down" && len(got) != 0 || dir == "up" && !slices.Equal(got, want) {
			t.Fatalf("after migration %d (%s): tables %v", i+1, dir, got)
		}
	}
	// The schema does better than the reference table on each weakness.
	var unique, convIndex, userIndex bool
	err = c.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_indexes WHERE tablename = 'alicia_reasoning_steps' AND indexdef LIKE '%UNIQUE%(conversation_id, message_id, step_index)%'),
		EXISTS (SELECT 1 FROM pg_indexes WHERE tablename = 'alicia_reasoning_steps' AND indexdef LIKE '%(conversation_id, created_at, step_index)%'),
		EXISTS (SELECT 1 FROM pg_indexes WHERE tablename = 'alicia_reasoning_steps' AND indexdef LIKE '%(previous_id, step_index)%')`).Scan(&unique, &convIndex, &userIndex)
	if err != nil || !unique || !convIndex || !userIndex {
		t.Fatalf("indexes: unique %v, by conversation %v, by user message %v, %v", unique, convIndex, userIndex, err)
	}
	var tz string
	if err := c.QueryRow(ctx, `SELECT data_type FROM information_schema.columns WHERE table_name = 'alicia_reasoning_steps' AND column_name = 'created_at'`).Scan(&tz); err != nil || tz != "timestamp with time zone" {
		t.Fatalf("created_at is %q (%v)", tz, err)
	}
}

// turn writes what a conversation's turn stores, the way the pipeline
// hands it over.
func turn(p storage.Store, conv, owner string, n int, steps int, content func(i, j int) string) []reasoning.Step {
	now := time.Now()
	p.SaveConversation(storage.Conversation{ID: conv, Owner: owner, CreatedAt: now})
	var all []reasoning.Step
	for i := range n {
		user := fmt.Sprintf("%s-u%d", conv, i)
		asst := fmt.Sprintf("%s-a%d", conv, i)
		p.SaveMessage(storage.Message{ID: user, ConversationID: conv, Role: "user", Content: "question", CreatedAt: now.Add(time.Duration(2*i) * time.Millisecond)})
		p.SaveMessage(storage.Message{ID: asst, ConversationID: conv, PreviousID: user, Role: "assistant", Status: storage.StatusStreaming, CreatedAt: now.Add(time.Duration(2*i+1) * time.Millisecond)})
		for j := range steps {
			s := reasoning.Step{ID: fmt.Sprintf("%s-s%d-%d", conv, i, j), ConversationID: conv, PreviousID: user, MessageID: asst,
				Index: int32(j + 1), Content: content(i, j), StartedAt: now, EndedAt: now}
			p.SaveStep(s)
			all = append(all, s)
		}
		p.SaveMessage(storage.Message{ID: asst, ConversationID: conv, PreviousID: user, Role: "assistant", Content: "answer", Status: storage.StatusComplete, CreatedAt: now.Add(time.Duration(2*i+1) * time.Millisecond)})
	}
	return all
}

func TestRoundTrip(t *testing.T) {
	url := testenv.Database(t)
	p := open(t, url, storage.ReasoningPlain, nil)
	ctx := context.Background()
	turn(p, "conv_a", "alice", 2, 3, func(i, j int) string { return fmt.Sprintf("thought %d.%d", i, j) })
	// The same step twice, as after a retried batch: one row.
	p.SaveStep(reasoning.Step{ID: "conv_a-s0-0", ConversationID: "conv_a", PreviousID: "conv_a-u0", MessageID: "conv_a-a0", Index: 1, Content: "duplicate", StartedAt: time.Now(), EndedAt: time.Now()})
	for i := int32(1); i <= 5; i++ {
		var to []string
		if i == 3 {
			to = []string{"bob"}
		}
		p.SaveEnvelope(storage.Envelope{ConversationID: "conv_a", StanzaID: -i, Payload: []byte{byte(i)}, To: to})
	}
	if err := p.SetMode(ctx, "alice", reasoning.ModeSummary); err != nil {
		t.Fatal(err)
	}
	flush(t, p)

	p2 := open(t, url, storage.ReasoningPlain, nil)
	h, err := p2.History(ctx, "conv_a")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range h {
		got = append(got, e.ID+":"+e.Status)
		for _, s := range e.Steps {
			got = append(got, fmt.Sprintf("  %d %s", s.Index, s.Content))
		}
	}
	want := []string{"conv_a-u0:complete", "conv_a-a0:complete", "  1 thought 0.0", "  2 thought 0.1", "  3 thought 0.2",
		"conv_a-u1:complete", "conv_a-a1:complete", "  1 thought 1.0", "  2 thought 1.1", "  3 thought 1.2"}
	if !slices.Equal(got, want) {
		t.Fatalf("history\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	envs, err := p2.Envelopes(ctx, "conv_a", 1, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var stanzas []int32
	for _, e := range envs {
		stanzas = append(stanzas, e.StanzaID)
	}
	if !slices.Equal(stanzas, []int32{-2, -4, -5}) {
		t.Fatalf("alice resumes with %v, want -2, -4, -5 (-3 was for bob only)", stanzas)
	}
	if m, _ := p2.Mode(ctx, "alice"); m != reasoning.ModeSummary {
		t.Fatalf("preference %s", m)
	}
	if _, err := p2.Conversation(ctx, "nope"); err != storage.ErrNotFound {
		t.Fatalf("unknown conversation: %v", err)
	}
}

// A record Postgres refuses for good is logged and counted, and the rest
// of its batch is written.
func TestRejectedRecordDoesNotBlockTheQueue(t *testing.T) {
	url := testenv.Database(t)
	p := open(t, url, storage.ReasoningPlain, nil)
	p.SaveConversation(storage.Conversation{ID: "c", Owner: "o"})
	p.SaveStep(reasoning.Step{ID: "bad", ConversationID: "c", PreviousID: "u", MessageID: "a", Index: 0, Content: "index 0 breaks a CHECK"})
	p.SaveStep(reasoning.Step{ID: "good", ConversationID: "c", PreviousID: "u", MessageID: "a", Index: 1, Content: "fine"})
	flush(t, p)
	var ids []string
	rows, _ := connect(t, url).Query(context.Background(), `SELECT id FROM alicia_reasoning_steps`)
	ids, _ = pgx.CollectRows(rows, pgx.RowTo[string])
	if !slices.Equal(ids, []string{"good"}) {
		t.Fatalf("rows %v", ids)
	}
}

const secret = "PLAINTEXT-REASONING-MARKER"

func TestEncryptedAndOffModesKeepNoPlaintext(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	for _, mode := range []storage.ReasoningMode{storage.ReasoningEncrypted, storage.ReasoningOff} {
		t.Run(string(mode), func(t *testing.T) {
			url := testenv.Database(t)
			p := open(t, url, mode, key)
			steps := turn(p, "conv_e", "alice", 1, 4, func(i, j int) string { return fmt.Sprintf("%s %d: the user wants Lyon", secret, j) })
			p.SaveEnvelope(storage.Envelope{ConversationID: "conv_e", StanzaID: -1, Payload: []byte("envelope with " + secret), Reasoning: true})
			p.SaveEnvelope(storage.Envelope{ConversationID: "conv_e", StanzaID: -2, Payload: []byte("an answer sentence")})
			flush(t, p)

			c := connect(t, url)
			for _, table := range []string{"alicia_reasoning_steps", "alicia_envelopes", "alicia_messages", "alicia_conversations"} {
				var dump string
				if err := c.QueryRow(context.Background(), `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+table+` t`).Scan(&dump); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(dump, secret) || strings.Contains(dump, fmt.Sprintf("%x", secret)) {
					t.Fatalf("%s holds plaintext reasoning:\n%s", table, dump)
				}
			}
			var n int
			_ = c.QueryRow(context.Background(), `SELECT count(*) FROM alicia_reasoning_steps`).Scan(&n)
			p2 := open(t, url, mode, key)
			h, err := p2.History(context.Background(), "conv_e")
			if err != nil {
				t.Fatal(err)
			}
			envs, _ := p2.Envelopes(context.Background(), "conv_e", 0, "alice")
			switch mode {
			case storage.ReasoningEncrypted:
				// The owner still reads the reasoning back.
				if n != len(steps) || len(h[1].Steps) != len(steps) || h[1].Steps[2].Content != steps[2].Content {
					t.Fatalf("%d rows; history %+v", n, h)
				}
				if len(envs) != 2 || !strings.Contains(string(envs[0].Payload), secret) {
					t.Fatalf("resume envelopes %+v", envs)
				}
			case storage.ReasoningOff:
				if n != 0 || len(h[1].Steps) != 0 {
					t.Fatalf("off mode stored %d steps", n)
				}
				if len(envs) != 1 || envs[0].StanzaID != -2 {
					t.Fatalf("off mode logged reasoning envelopes: %+v", envs)
				}
			}
		})
	}
}

// Zero loss: 20 conversations stream reasoning steps while Postgres is
// stopped for 15 s and started again; every step is then in the table
// exactly once.
func TestZeroLossAcrossAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 20 s; run without -short")
	}
	cluster := testenv.StartCluster(t)
	p := open(t, cluster.URL, storage.ReasoningPlain, nil)
	const conversations, perConversation = 20, 60
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sent []string
	stop := make(chan struct{})
	for c := range conversations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conv := fmt.Sprintf("conv_%02d", c)
			p.SaveConversation(storage.Conversation{ID: conv, Owner: "user"})
			p.SaveMessage(storage.Message{ID: conv + "-u", ConversationID: conv, Role: "user", Content: "q"})
			p.SaveMessage(storage.Message{ID: conv + "-a", ConversationID: conv, PreviousID: conv + "-u", Role: "assistant", Status: storage.StatusStreaming})
			for i := range perConversation {
				id := fmt.Sprintf("%s-%03d", conv, i)
				p.SaveStep(reasoning.Step{ID: id, ConversationID: conv, PreviousID: conv + "-u", MessageID: conv + "-a",
					Index: int32(i + 1), Content: "step " + id, StartedAt: time.Now(), EndedAt: time.Now()})
				mu.Lock()
				sent = append(sent, id)
				mu.Unlock()
				select {
				case <-stop:
				case <-time.After(300 * time.Millisecond): // a step every 300 ms: 18 s per conversation
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	cluster.Stop()
	t.Log("postgres stopped")
	time.Sleep(15 * time.Second)
	cluster.Start()
	t.Log("postgres started")
	wg.Wait()
	flush(t, p)
	assertExactlyOnce(t, cluster.URL, sent)
}

// A graceful shutdown mid-stream flushes everything queued.
func TestShutdownMidStreamFlushes(t *testing.T) {
	url := testenv.Database(t)
	p, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for c := range 20 {
		conv := fmt.Sprintf("conv_%02d", c)
		for _, s := range turn(p, conv, "u", 1, 50, func(i, j int) string { return "x" }) {
			sent = append(sent, s.ID)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertExactlyOnce(t, url, sent)
}

func assertExactlyOnce(t *testing.T, url string, sent []string) {
	t.Helper()
	rows, err := connect(t, url).Query(context.Background(), `SELECT id, count(*) FROM alicia_reasoning_steps GROUP BY id`)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		counts[id] = n
	}
	missing := 0
	for _, id := range sent {
		if counts[id] != 1 {
			missing++
		}
	}
	if missing > 0 || len(counts) != len(sent) {
		t.Fatalf("%d of %d steps missing or duplicated; %d rows", missing, len(sent), len(counts))
	}
	t.Logf("%d steps, each stored exactly once", len(sent))
}

// Past its soft limit the queue reports saturation (callers refuse new
// turns) and still loses nothing; once Postgres is back it drains.
func TestSaturationIsReportedAndNothingIsLost(t *testing.T) {
	cluster := testenv.StartCluster(t)
	p, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: cluster.URL, QueueLimit: 10})
	if err != nil {
		t.Fatal(err)
	}
	cluster.Stop()
	var sent []string
	p.SaveConversation(storage.Conversation{ID: "c", Owner: "u"})
	for i := range 30 {
		id := fmt.Sprintf("s%02d", i)
		p.SaveStep(reasoning.Step{ID: id, ConversationID: "c", PreviousID: "u", MessageID: "a", Index: int32(i + 1), Content: "x", StartedAt: time.Now(), EndedAt: time.Now()})
		sent = append(sent, id)
	}
	if !p.Saturated() {
		t.Fatal("31 queued records over a limit of 10, and not saturated")
	}
	cluster.Start()
	testenv.Eventually(t, "the queue to drain", func() bool { return !p.Saturated() })
	flush(t, p)
	assertExactlyOnce(t, cluster.URL, sent)
}

// The migration that keys messages by conversation keeps the rows written
// under the old schema, their steps included.
func TestMessagesPerConversationMigrationKeepsData(t *testing.T) {
	url := testenv.Database(t)
	ctx := context.Background()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `
		INSERT INTO alicia_conversations (id, owner_identity) VALUES ('old', 'alice');
		INSERT INTO alicia_messages (id, conversation_id, role, content, created_at) VALUES ('m1', 'old', 'user', 'kept question', now());
		INSERT INTO alicia_messages (id, conversation_id, previous_id, role, content, created_at) VALUES ('a1', 'old', 'm1', 'assistant', 'kept answer', now() + interval '1 ms');
		INSERT INTO alicia_reasoning_steps (id, conversation_id, message_id, previous_id, step_index, content, started_at, created_at)
			VALUES ('s1', 'old', 'a1', 'm1', 1, 'kept thought', now(), now())`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatal(err)
	}
	p := open(t, url, storage.ReasoningPlain, nil)
	turn(p, "new", "bob", 1, 1, func(i, j int) string { return "new thought" })
	p.SaveMessage(storage.Message{ID: "m1", ConversationID: "new", Role: "user", Content: "same id, other conversation"})
	flush(t, p)
	h, err := open(t, url, storage.ReasoningPlain, nil).History(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].Content != "kept question" || h[1].Content != "kept answer" || len(h[1].Steps) != 1 || h[1].Steps[0].Content != "kept thought" {
		t.Fatalf("old conversation after the migration: %+v", h)
	}
}

// Two processes on one database: a preference changed through one is
// what the other serves next, although it had the old value cached.
func TestPreferenceChangeReachesAnotherProcess(t *testing.T) {
	url := testenv.Database(t)
	ctx := context.Background()
	a, b := open(t, url, storage.ReasoningPlain, nil), open(t, url, storage.ReasoningPlain, nil)
	if err := a.SetMode(ctx, "alice", reasoning.ModeSummary); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*storage.Postgres{a, b} {
		testenv.Eventually(t, "the first value", func() bool { m, _ := s.Mode(ctx, "alice"); return m == reasoning.ModeSummary })
	}
	// Both now serve "summary" from memory; b changes it twice.
	for _, want := range []reasoning.Mode{reasoning.ModeFull, reasoning.ModeOff} {
		start := time.Now()
		if err := b.SetMode(ctx, "alice", want); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, fmt.Sprintf("process a to serve %s after b set it", want), func() bool { m, _ := a.Mode(ctx, "alice"); return m == want })
		t.Logf("process a serves %s %v after b set it", want, time.Since(start).Round(time.Millisecond))
	}
}
