package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/reasoning"
)

// Config opens a store.
type Config struct {
	// DatabaseURL is a Postgres URL; empty means an in-memory store.
	DatabaseURL string
	Reasoning   ReasoningMode
	// Key seals reasoning in ReasoningEncrypted mode (32 bytes).
	Key []byte
	// QueueLimit is the write queue's soft limit (default 20,000 records).
	QueueLimit int
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Open returns the store a configuration asks for. A Postgres store is
// migrated to the newest schema first.
func Open(ctx context.Context, c Config) (Store, error) {
	if c.Reasoning == "" {
		c.Reasoning = ReasoningPlain
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch c.Reasoning {
	case ReasoningPlain, ReasoningOff:
	case ReasoningEncrypted:
		if len(c.Key) != 32 {
			return nil, errors.New("storage: encrypted reasoning needs a 32-byte key (ALICIA_STORAGE_KEY)")
		}
	default:
		return nil, fmt.Errorf("storage: unknown reasoning mode %q (plain, encrypted, off)", c.Reasoning)
	}
	if c.DatabaseURL == "" {
		c.Logger.Warn("no ALICIA_DATABASE_URL: conversations are kept in memory and lost when Alicia stops")
		return NewMemory(c.Reasoning), nil
	}
	return OpenPostgres(ctx, c)
}

// Postgres is the durable store.
type Postgres struct {
	pool   *pgxpool.Pool
	w      *writer
	mode   ReasoningMode
	sealer *sealer
	log    *slog.Logger

	// Preferences are read on every reasoning step, so they are served
	// from memory, but the database stays the truth across processes:
	// every committed change is announced on a channel that each store
	// listens to (LISTEN/NOTIFY), and an entry is dropped when its
	// identity's change is announced. While the listener is not
	// connected nothing is cached (a missed announcement would leave a
	// stale entry forever). epoch counts announcements, so that a read
	// that raced one is not cached.
	prefMu     sync.RWMutex
	prefs      map[string]reasoning.Mode
	epoch      atomic.Uint64
	listening  atomic.Bool
	stopListen context.CancelFunc
	listenDone chan struct{}
}

// OpenPostgres connects, migrates and starts the writer.
func OpenPostgres(ctx context.Context, c Config) (*Postgres, error) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = 20_000
	}
	pool, err := pgxpool.New(ctx, c.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	if err := Migrate(ctx, pool, "up"); err != nil {
		pool.Close()
		return nil, err
	}
	p := &Postgres{pool: pool, mode: c.Reasoning, log: c.Logger, prefs: map[string]reasoning.Mode{}, listenDone: make(chan struct{})}
	if c.Reasoning == ReasoningEncrypted {
		if p.sealer, err = newSealer(c.Key); err != nil {
			pool.Close()
			return nil, err
		}
	}
	p.w = newWriter(pool, c.Logger, c.QueueLimit, c.Registerer)
	listenCtx, stop := context.WithCancel(context.Background())
	p.stopListen = stop
	go p.listen(listenCtx)
	return p, nil
}

// Migrate applies ("up"), rolls back ("down", every migration) or reports
// ("status") the schema.
func Migrate(ctx context.Context, pool *pgxpool.Pool, direction string) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return migrateDB(ctx, db, direction)
}

func migrateDB(ctx context.Context, db *sql.DB, direction string) error {
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		return fmt.Errorf("storage: migrations: %w", err)
	}
	switch direction {
	case "up":
		_, err = provider.Up(ctx)
	case "down":
		_, err = provider.DownTo(ctx, 0)
	case "status":
		var st []*goose.MigrationStatus
		if st, err = provider.Status(ctx); err == nil {
			for _, s := range st {
				slog.Info("migration", "version", s.Source.Version, "file", s.Source.Path, "state", s.State)
			}
		}
	default:
		return fmt.Errorf("storage: unknown migration direction %q (up, down, status)", direction)
	}
	if err != nil {
		return fmt.Errorf("storage: migrate %s: %w", direction, err)
	}
	return nil
}

func (p *Postgres) SaveConversation(c Conversation) {
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now()
	}
	p.w.enqueue(record{conv: &c})
}

func (p *Postgres) SaveMessage(m Message) {
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now()
	}
	if m.Status == "" {
		m.Status = StatusComplete
	}
	p.w.enqueue(record{msg: &m})
}

func (p *Postgres) SaveStep(s reasoning.Step) {
	if p.mode == ReasoningOff {
		return
	}
	row := &stepRow{id: s.ID, conversationID: s.ConversationID, messageID: s.MessageID, previousID: s.PreviousID,
		index: s.Index, startedAt: s.StartedAt, endedAt: s.EndedAt,
		encryptedValue: nullable(s.EncryptedValue), toolCallID: nullable(s.ToolCallID), cutShort: s.CutShort}
	if p.sealer != nil {
		row.sealed = p.sealer.seal([]byte(s.Content), s.ID)
	} else {
		row.content = &s.Content
	}
	if row.endedAt.IsZero() {
		row.endedAt = time.Now()
	}
	if row.startedAt.IsZero() {
		row.startedAt = row.endedAt
	}
	p.w.enqueue(record{step: row})
}

func (p *Postgres) SaveEnvelope(e Envelope) {
	if e.SentAt.IsZero() {
		e.SentAt = time.Now()
	}
	row := &envRow{Envelope: e}
	if e.Reasoning {
		switch p.mode {
		case ReasoningOff:
			return
		case ReasoningEncrypted:
			row.Payload = p.sealer.seal(e.Payload, envelopeRowID(e.ConversationID, e.StanzaID))
			row.encrypted = true
		}
	}
	p.w.enqueue(record{env: row})
}

func envelopeRowID(conversationID string, stanza int32) string {
	return fmt.Sprintf("%s/%d", conversationID, stanza)
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (p *Postgres) Conversation(ctx context.Context, id string) (Conversation, error) {
	var c Conversation
	err := p.pool.QueryRow(ctx, `SELECT id, owner_identity, created_at FROM alicia_conversations WHERE id = $1`, id).
		Scan(&c.ID, &c.Owner, &c.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, ErrNotFound
	}
	return c, err
}

func (p *Postgres) History(ctx context.Context, conversationID string) ([]Entry, error) {
	if _, err := p.Conversation(ctx, conversationID); err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, `SELECT id, conversation_id, coalesce(previous_id, ''), role, content, status,
			coalesce(variant_of, ''), coalesce(replaced_by_id, ''), created_at
		FROM alicia_messages WHERE conversation_id = $1 ORDER BY created_at, id`, conversationID)
	if err != nil {
		return nil, err
	}
	var out []Entry
	index := map[string]int{}
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.ID, &e.ConversationID, &e.PreviousID, &e.Role, &e.Content, &e.Status, &e.VariantOf, &e.ReplacedByID, &e.CreatedAt); err != nil {
			return nil, err
		}
		index[e.ID] = len(out)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	steps, err := p.pool.Query(ctx, `SELECT id, conversation_id, message_id, previous_id, step_index, content, content_encrypted,
			coalesce(encrypted_value, ''), coalesce(tool_call_id, ''), cut_short, started_at, created_at
		FROM alicia_reasoning_steps WHERE conversation_id = $1 ORDER BY message_id, step_index`, conversationID)
	if err != nil {
		return nil, err
	}
	defer steps.Close()
	for steps.Next() {
		var s reasoning.Step
		var content *string
		var sealed []byte
		if err := steps.Scan(&s.ID, &s.ConversationID, &s.MessageID, &s.PreviousID, &s.Index, &content, &sealed,
			&s.EncryptedValue, &s.ToolCallID, &s.CutShort, &s.StartedAt, &s.EndedAt); err != nil {
			return nil, err
		}
		switch {
		case content != nil:
			s.Content = *content
		case p.sealer != nil:
			plain, err := p.sealer.open(sealed, s.ID)
			if err != nil {
				return nil, fmt.Errorf("storage: step %s: %w", s.ID, err)
			}
			s.Content = string(plain)
		default:
			s.Content = "" // sealed under a key this process does not have
		}
		if i, ok := index[s.MessageID]; ok {
			out[i].Steps = append(out[i].Steps, s)
		}
	}
	return out, steps.Err()
}

func (p *Postgres) Envelopes(ctx context.Context, conversationID string, after int32, identity string) ([]Envelope, error) {
	rows, err := p.pool.Query(ctx, `SELECT stanza_id, payload, encrypted, destinations, sent_at FROM alicia_envelopes
		WHERE conversation_id = $1 AND stanza_id < $2 AND (destinations IS NULL OR $3 = ANY(destinations))
		ORDER BY stanza_id DESC`, conversationID, -after, identity)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Envelope
	for rows.Next() {
		e := Envelope{ConversationID: conversationID}
		var encrypted bool
		if err := rows.Scan(&e.StanzaID, &e.Payload, &encrypted, &e.To, &e.SentAt); err != nil {
			return nil, err
		}
		if encrypted {
			if p.sealer == nil {
				return nil, errors.New("storage: an encrypted envelope and no key")
			}
			if e.Payload, err = p.sealer.open(e.Payload, envelopeRowID(conversationID, e.StanzaID)); err != nil {
				return nil, err
			}
			e.Reasoning = true
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (p *Postgres) ReserveStanzas(ctx context.Context, conversationID string, n int32) (int32, error) {
	var first int32
	err := p.pool.QueryRow(ctx, `INSERT INTO alicia_stanza_blocks AS b (conversation_id, next) VALUES ($1, 1 + $2)
		ON CONFLICT (conversation_id) DO UPDATE SET next = b.next + $2
		RETURNING next - $2`, conversationID, n).Scan(&first)
	return first, err
}

func (p *Postgres) Saturated() bool { return p.w.saturated() }
func (p *Postgres) Durable() bool   { return true }

// QueueLatency reports p50 and p95 of the delay from a record's queueing
// to its commit, over the last 4096 records.
func (p *Postgres) QueueLatency() (p50, p95 time.Duration) { return p.w.queueLatency() }

// Close flushes the queue until ctx ends, then closes the pool.
func (p *Postgres) Close(ctx context.Context) error {
	left := p.w.close(ctx)
	p.stopListen()
	<-p.listenDone
	p.pool.Close()
	if left > 0 {
		return fmt.Errorf("storage: %d records unwritten at shutdown", left)
	}
	return nil
}
