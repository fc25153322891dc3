package storage

import (
	"context"
	"errors"
	"log/slog"

	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// record is one queued write; exactly one field is set.
type record struct {
	conv     *Conversation
	msg      *Message
	step     *stepRow
	env      *envRow
	enqueued time.Time
}

type stepRow struct {
	id, conversationID, messageID, previousID string
	index                                     int32
	content                                   *string
	sealed                                    []byte
	encryptedValue, toolCallID                *string
	cutShort                                  bool
	startedAt, endedAt                        time.Time
}

type envRow struct {
	Envelope
	encrypted bool
}

// writer drains the queue into Postgres, one transaction per batch.
type writer struct {
	pool      *pgxpool.Pool
	log       *slog.Logger
	batchSize int
	softLimit int
	metrics   *metrics

	mu      sync.Mutex
	queue   []record
	wake    chan struct{}
	closing chan struct{}
	done    chan struct{}
	closed  bool
	// ctx aborts writes when close runs out of time.
	ctx    context.Context
	cancel context.CancelFunc

	latMu     sync.Mutex
	latencies []time.Duration // ring of recent enqueue → commit delays
	latNext   int
}

type metrics struct {
	queued, written, batches, retries, rejected prometheus.Counter
	saturated                                   prometheus.Counter
	depth                                       prometheus.GaugeFunc
}

func newWriter(pool *pgxpool.Pool, log *slog.Logger, softLimit int, reg prometheus.Registerer) *writer {
	w := &writer{pool: pool, log: log, batchSize: 500, softLimit: softLimit,
		wake: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{}),
		latencies: make([]time.Duration, 0, 4096)}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "storage", Name: name, Help: help})
	}
	w.metrics = &metrics{
		queued:    counter("records_queued_total", "Records queued for Postgres."),
		written:   counter("records_written_total", "Records committed to Postgres."),
		batches:   counter("batches_total", "Transactions committed."),
		retries:   counter("retries_total", "Batch attempts that failed and will be retried."),
		rejected:  counter("records_rejected_total", "Records Postgres refused for good (logged one by one)."),
		saturated: counter("saturated_total", "Records queued while the queue was past its soft limit."),
	}
	w.metrics.depth = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "storage", Name: "queue_depth",
		Help: "Records waiting to be written."}, func() float64 { return float64(w.depth()) })
	if reg != nil {
		for _, c := range []prometheus.Collector{w.metrics.queued, w.metrics.written, w.metrics.batches, w.metrics.retries,
			w.metrics.rejected, w.metrics.saturated, w.metrics.depth} {
			if err := reg.Register(c); err != nil {
				log.Warn("storage metric not registered", "err", err)
			}
		}
	}
	go w.run()
	return w
}

func (w *writer) enqueue(r record) {
	r.enqueued = time.Now()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.metrics.rejected.Inc()
		w.log.Error("storage record after close", "record", describe(r))
		return
	}
	w.queue = append(w.queue, r)
	over := len(w.queue) > w.softLimit
	w.mu.Unlock()
	w.metrics.queued.Inc()
	if over {
		w.metrics.saturated.Inc()
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *writer) depth() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

func (w *writer) saturated() bool { return w.depth() > w.softLimit }

// run is the writer's one goroutine. It ends when close finds the queue
// empty, or when close's deadline cancels it.
func (w *writer) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		n := min(len(w.queue), w.batchSize)
		batch := slices.Clone(w.queue[:n])
		w.mu.Unlock()
		if n == 0 {
			select {
			case <-w.wake:
				continue
			case <-w.closing:
				return
			case <-w.ctx.Done():
				return
			}
		}
		// The same batch is retried until it lands: exponential waits with
		// jitter (so that many processes do not hammer a recovering
		// server in step), from 100 ms up to 5 s, ending with close.
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval = 100*time.Millisecond, 5*time.Second
		_, err := backoff.Retry(w.ctx, func() (struct{}, error) { return struct{}{}, w.write(batch) },
			backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, wait time.Duration) {
				w.metrics.retries.Inc()
				w.log.Warn("storage write failed, retrying", "records", n, "in", wait, "err", err)
			}))
		if err == nil {
			w.mu.Lock()
			w.queue = slices.Delete(w.queue, 0, n)
			if len(w.queue) == 0 {
				w.queue = nil // let a burst's backing array go
			}
			w.mu.Unlock()
			w.observe(batch)
			continue
		}
		return // close ran out of time
	}
}

// write commits a batch. A batch Postgres refuses for its data (a check
// or integrity violation) would fail forever, so it is written record by
// record and the offending records are logged and counted, never retried.
func (w *writer) write(batch []record) error {
	ctx, cancel := context.WithTimeout(w.ctx, 15*time.Second)
	defer cancel()
	err := w.commit(ctx, batch)
	var pgErr *pgconn.PgError
	if err == nil || !errors.As(err, &pgErr) || (pgErr.Code[:2] != "23" && pgErr.Code[:2] != "22") {
		return err
	}
	for _, r := range batch {
		if err := w.commit(ctx, []record{r}); err != nil {
			if errors.As(err, &pgErr) && (pgErr.Code[:2] == "23" || pgErr.Code[:2] == "22") {
				w.metrics.rejected.Inc()
				w.log.Error("storage record rejected", "record", describe(r), "err", err)
				continue
			}
			return err
		}
	}
	return nil
}

func (w *writer) commit(ctx context.Context, batch []record) error {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // no-op after commit
	b := &pgx.Batch{}
	for _, r := range batch {
		queue(b, &r)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	w.metrics.batches.Inc()
	w.metrics.written.Add(float64(len(batch)))
	return nil
}

// queue adds a record's statement. Every statement is idempotent: a batch
// retried after a lost commit acknowledgement writes nothing twice.
func queue(b *pgx.Batch, r *record) {
	switch {
	case r.conv != nil:
		b.Queue(`INSERT INTO alicia_conversations (id, owner_identity, created_at, updated_at) VALUES ($1, $2, $3, $3)
			ON CONFLICT (id) DO UPDATE SET updated_at = greatest(alicia_conversations.updated_at, excluded.updated_at)`,
			r.conv.ID, r.conv.Owner, r.conv.CreatedAt)
	case r.msg != nil:
		m := r.msg
		b.Queue(`INSERT INTO alicia_messages (id, conversation_id, previous_id, role, content, status, variant_of, replaced_by_id, created_at, updated_at)
			VALUES ($1, $2, nullif($3, ''), $4, $5, $6, nullif($7, ''), nullif($8, ''), $9, $10)
			ON CONFLICT (conversation_id, id) DO UPDATE SET content = excluded.content, status = excluded.status,
				replaced_by_id = coalesce(excluded.replaced_by_id, alicia_messages.replaced_by_id), updated_at = excluded.updated_at`,
			m.ID, m.ConversationID, m.PreviousID, m.Role, m.Content, m.Status, m.VariantOf, m.ReplacedByID, m.CreatedAt, r.enqueued)
	case r.step != nil:
		s := r.step
		b.Queue(`INSERT INTO alicia_reasoning_steps (id, conversation_id, message_id, previous_id, step_index, content, content_encrypted,
				encrypted_value, tool_call_id, cut_short, started_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING`,
			s.id, s.conversationID, s.messageID, s.previousID, s.index, s.content, s.sealed, s.encryptedValue, s.toolCallID, s.cutShort, s.startedAt, s.endedAt)
	case r.env != nil:
		e := r.env
		b.Queue(`INSERT INTO alicia_envelopes (conversation_id, stanza_id, payload, encrypted, destinations, sent_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
			e.ConversationID, e.StanzaID, e.Payload, e.encrypted, e.To, e.SentAt)
	}
}

func describe(r record) string {
	switch {
	case r.conv != nil:
		return "conversation " + r.conv.ID
	case r.msg != nil:
		return "message " + r.msg.ConversationID + "/" + r.msg.ID
	case r.step != nil:
		return "reasoning step " + r.step.id
	case r.env != nil:
		return "envelope of " + r.env.ConversationID
	}
	return "nothing"
}

func (w *writer) observe(batch []record) {
	now := time.Now()
	w.latMu.Lock()
	defer w.latMu.Unlock()
	for _, r := range batch {
		d := now.Sub(r.enqueued)
		if len(w.latencies) < cap(w.latencies) {
			w.latencies = append(w.latencies, d)
		} else {
			w.latencies[w.latNext] = d
			w.latNext = (w.latNext + 1) % len(w.latencies)
		}
	}
}

// QueueLatency returns the p50 and p95 of the delay from queueing a
// record to its commit, over the last 4096 records.
func (w *writer) queueLatency() (p50, p95 time.Duration) {
	w.latMu.Lock()
	l := slices.Clone(w.latencies)
	w.latMu.Unlock()
	if len(l) == 0 {
		return 0, 0
	}
	slices.Sort(l)
	return l[len(l)/2], l[len(l)*95/100]
}

// close stops the writer after it has flushed the queue, or when ctx
// ends; it returns how many records were left unwritten.
func (w *writer) close(ctx context.Context) int {
	w.mu.Lock()
	already := w.closed
	w.closed = true
	w.mu.Unlock()
	if already {
		<-w.done
		return w.depth()
	}
	close(w.closing)
	select {
	case <-w.done:
		return 0
	case <-ctx.Done():
		w.cancel()
		<-w.done
		n := w.depth()
		w.log.Error("storage closed with records unwritten", "records", n)
		return n
	}
}
