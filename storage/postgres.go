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
	gonanoid "github.com/matoous/go-nanoid/v2"
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
	// BatchWindow is how long the writer collects records before it
	// sends them in one round trip (default DefaultBatchWindow; negative:
	// none, each batch goes as soon as the writer is free).
	BatchWindow time.Duration
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
}

// DefaultBatchWindow is the writer's default collection window: a
// process sends about ten batches a second at most, under one per turn
// at 50 users (0.85 in the bench, 11 without a window). A longer window
// saves less and less of a turn's round trips (its reads stay), and a
// record waits up to the window longer to be durable: a tenth of a
// second is well under the seconds between one turn and the next, and
// no turn waits for its writes.
const DefaultBatchWindow = 100 * time.Millisecond

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

	// The history of a conversation is read once by the engine of the
	// process serving it, which lays its own turns over it; what another
	// process writes to the conversation is announced (historyChannel) and
	// changes the conversation's HistoryVersion here. origin names this
	// process in its own announcements.
	origin    string
	histMu    sync.Mutex
	histSeen  map[string]uint64 // conversation → the announcement that last named it
	histBase  uint64            // every version is at least this: raised when announcements may have been missed
	histCount uint64
}

// OpenPostgres connects, migrates and starts the writer.
func OpenPostgres(ctx context.Context, c Config) (*Postgres, error) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = 20_000
	}
	if c.BatchWindow == 0 {
		c.BatchWindow = DefaultBatchWindow
	}
	pool, err := pgxpool.New(ctx, c.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	if err := Migrate(ctx, pool, "up"); err != nil {
		pool.Close()
		return nil, err
	}
	p := &Postgres{pool: pool, mode: c.Reasoning, log: c.Logger, prefs: map[string]reasoning.Mode{}, listenDone: make(chan struct{}),
		histSeen: map[string]uint64{}}
	if c.Reasoning == ReasoningEncrypted {
		if p.sealer, err = newSealer(c.Key); err != nil {
			pool.Close()
			return nil, err
		}
	}
	p.origin = "p_" + gonanoid.MustGenerate("abcdefghijklmnopqrstuvwxyz0123456789", 12)
	p.w = newWriter(pool, c.Logger, c.QueueLimit, c.BatchWindow, p.origin, c.Registerer)
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

// historyQuery reads a conversation, its messages and their steps in one
// round trip. The conversation drives the joins, so that an unknown one
// gives no row and a known one without messages a row of NULLs.
const historyQuery = `SELECT m.id, coalesce(m.previous_id, ''), coalesce(m.role, ''), coalesce(m.content, ''), coalesce(m.status, ''),
		coalesce(m.variant_of, ''), coalesce(m.replaced_by_id, ''), m.created_at, coalesce(m.author, ''),
		s.id, coalesce(s.previous_id, ''), s.step_index, s.content, s.content_encrypted,
		coalesce(s.encrypted_value, ''), coalesce(s.tool_call_id, ''), coalesce(s.cut_short, false), s.started_at, s.created_at
	FROM alicia_conversations c
	LEFT JOIN alicia_messages m ON m.conversation_id = c.id
	LEFT JOIN alicia_reasoning_steps s ON s.conversation_id = c.id AND s.message_id = m.id
	WHERE c.id = $1
	ORDER BY m.created_at, m.id, s.step_index`

func (p *Postgres) History(ctx context.Context, conversationID string) ([]Entry, error) {
	rows, err := p.pool.Query(ctx, historyQuery, conversationID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Entry
	found := false
	for rows.Next() {
		found = true
		var (
			m                 Message
			messageID, stepID *string
			created           *time.Time
			s                 reasoning.Step
			index             *int32
			content           *string
			sealed            []byte
			started, ended    *time.Time
		)
		if err := rows.Scan(&messageID, &m.PreviousID, &m.Role, &m.Content, &m.Status, &m.VariantOf, &m.ReplacedByID, &created, &m.Author,
			&stepID, &s.PreviousID, &index, &content, &sealed, &s.EncryptedValue, &s.ToolCallID, &s.CutShort, &started, &ended); err != nil {
			return nil, err
		}
		if messageID == nil {
			continue // the conversation has no message
		}
		// A message comes on as many rows as it has steps, one after
		// another (the order is by message first).
		if len(out) == 0 || out[len(out)-1].ID != *messageID {
			m.ID, m.ConversationID, m.CreatedAt = *messageID, conversationID, *created
			out = append(out, Entry{Message: m})
		}
		if stepID == nil {
			continue
		}
		s.ID, s.ConversationID, s.MessageID, s.Index, s.StartedAt, s.EndedAt = *stepID, conversationID, *messageID, *index, *started, *ended
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
		last := &out[len(out)-1]
		last.Steps = append(last.Steps, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	return out, nil
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
