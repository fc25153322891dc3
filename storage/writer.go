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

// writer drains the queue into Postgres, one transaction and one round
// trip per batch.
type writer struct {
	pool      *pgxpool.Pool
	log       *slog.Logger
	batchSize int
	softLimit int
	// window is how long a batch collects records before it is sent
	// (group commit); zero or less sends at once.
	window  time.Duration
	metrics *metrics
	// origin names this process in the announcements of what it wrote
	// (historyChannel), so that it does not take its own for another's.
	origin string

	mu      sync.Mutex
	queue   []record
	wake    chan struct{}
	full    chan struct{} // the queue reached a batch: stop collecting
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

func newWriter(pool *pgxpool.Pool, log *slog.Logger, softLimit int, window time.Duration, origin string, reg prometheus.Registerer) *writer {
	w := &writer{pool: pool, log: log, batchSize: 500, softLimit: softLimit, window: window, origin: origin,
		wake: make(chan struct{}, 1), full: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{}),
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
	n := len(w.queue)
	w.mu.Unlock()
	w.metrics.queued.Inc()
	if n > w.softLimit {
		w.metrics.saturated.Inc()
	}
	signal(w.wake)
	if n == w.batchSize {
		signal(w.full)
	}
}

// signal sends on a channel of capacity one without blocking: a signal
// already pending says the same.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
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
		if !w.await() {
			return
		}
		w.collect()
		w.mu.Lock()
		n := min(len(w.queue), w.batchSize)
		batch := slices.Clone(w.queue[:n])
		w.mu.Unlock()
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

// await waits for a queued record. false: the writer is to stop, as the
// queue is empty and closed, or close ran out of time.
func (w *writer) await() bool {
	for {
		if w.depth() > 0 {
			return true
		}
		select {
		case <-w.wake:
		case <-w.closing:
			// A record may have come between the look at the queue and
			// close; none can come after it.
			if w.depth() == 0 {
				return false
			}
		case <-w.ctx.Done():
			return false
		}
	}
}

// collect holds the queue until its oldest record has waited the window,
// so that the records that come meanwhile, from every conversation and
// from the rest of the same turn, share its round trip: a turn's records
// come over seconds, one or a few at a time, and sent as they come they
// cost a round trip each. A full batch, close and a queue that waited
// already (behind a slow or failed write) go at once, so that no record
// waits more than one window for it.
//
// The window opens with the first record, even after an idle spell. To
// send a record that finds the writer idle at once, and hold only those
// after it, would spend a round trip on the first record of every burst
// (of a lone user's every turn) and save no one any waiting: writes are
// off the turn's path, and the delay a window adds is only that of the
// record's durability, bounded by the window.
func (w *writer) collect() {
	if w.window <= 0 {
		return
	}
	select {
	case <-w.full: // a signal from an earlier batch
	default:
	}
	w.mu.Lock()
	full := len(w.queue) >= w.batchSize
	wait := w.window - time.Since(w.queue[0].enqueued)
	w.mu.Unlock()
	if full || wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.full:
	case <-w.closing:
	case <-w.ctx.Done():
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
	// Sent on the pool rather than in a transaction, the batch is one
	// pipeline closed by a single Sync, and Postgres runs the statements
	// before a Sync as one implicit transaction: all of them commit or
	// none does, as with BEGIN and COMMIT, in one round trip instead of
	// three.
	if err := w.pool.SendBatch(ctx, statements(batch, w.origin)).Close(); err != nil {
		return err
	}
	w.metrics.batches.Inc()
	w.metrics.written.Add(float64(len(batch)))
	return nil
}

// The batch's statements, one per table, each inserting all of the
// batch's rows for its table from arrays: their text never changes, so
// every connection prepares each once. Every statement is idempotent: a
// batch retried after a lost commit acknowledgement writes nothing twice.
const (
	insertConversations = `INSERT INTO alicia_conversations (id, owner_identity, created_at, updated_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[])
		ON CONFLICT (id) DO UPDATE SET updated_at = greatest(alicia_conversations.updated_at, excluded.updated_at)`
	insertMessages = `INSERT INTO alicia_messages (id, conversation_id, previous_id, role, content, status, variant_of, replaced_by_id, created_at, updated_at, author)
		SELECT id, conversation_id, nullif(previous_id, ''), role, content, status, nullif(variant_of, ''), nullif(replaced_by_id, ''), created_at, updated_at, nullif(author, '')
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[], $11::text[])
			AS m (id, conversation_id, previous_id, role, content, status, variant_of, replaced_by_id, created_at, updated_at, author)
		ON CONFLICT (conversation_id, id) DO UPDATE SET content = excluded.content, status = excluded.status,
			replaced_by_id = coalesce(excluded.replaced_by_id, alicia_messages.replaced_by_id), updated_at = excluded.updated_at,
			author = coalesce(excluded.author, alicia_messages.author)`
	insertSteps = `INSERT INTO alicia_reasoning_steps (id, conversation_id, message_id, previous_id, step_index, content, content_encrypted,
			encrypted_value, tool_call_id, cut_short, started_at, created_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int4[], $6::text[], $7::bytea[],
			$8::text[], $9::text[], $10::bool[], $11::timestamptz[], $12::timestamptz[])
		ON CONFLICT (id) DO NOTHING`
	// An envelope's destinations are a slice of one flat array ($7): an
	// array of arrays must be rectangular, and lists of addressees are
	// not. A negative count stands for NULL (everyone).
	insertEnvelopes = `INSERT INTO alicia_envelopes (conversation_id, stanza_id, payload, encrypted, destinations, sent_at)
		SELECT conversation_id, stanza_id, payload, encrypted,
			CASE WHEN n >= 0 THEN ($7::text[])[first + 1 : first + n] END, sent_at
		FROM unnest($1::text[], $2::int4[], $3::bytea[], $4::bool[], $5::int4[], $6::int4[], $8::timestamptz[])
			AS e (conversation_id, stanza_id, payload, encrypted, first, n, sent_at)
		ON CONFLICT DO NOTHING`
)

// statements groups a batch by table. Conversations go first, so that
// the rows referring to them find them. One statement may not touch a
// row twice, so the records of one row are merged into the row the
// statements one record at a time would have left:
//   - a conversation keeps its first owner and creation time, and its
//     latest time as updated_at;
//   - a message keeps its first version's place (previous message, role,
//     variant, creation time), its last version's content, status and
//     update time, and the last replacement and author named;
//   - a step or an envelope written twice keeps its first version (the
//     later ones did nothing).
func statements(batch []record, origin string) *pgx.Batch {
	type msgKey struct{ conv, id string }
	type envKey struct {
		conv   string
		stanza int32
	}
	var (
		conv struct {
			id, owner        []string
			created, updated []time.Time
		}
		msg struct {
			id, conv, prev, role, content, status, variant, replaced, author []string
			created, updated                                                 []time.Time
		}
		step struct {
			id, conv, msg, prev         []string
			index                       []int32
			content, encValue, toolCall []*string
			sealed                      [][]byte
			cut                         []bool
			started, ended              []time.Time
		}
		env struct {
			conv      []string
			stanza    []int32
			payload   [][]byte
			encrypted []bool
			first, n  []int32
			sent      []time.Time
		}
		convs = map[string]int{}
		msgs  = map[msgKey]int{}
		steps = map[string]bool{}
		envs  = map[envKey]bool{}
	)
	dests := []string{} // never NULL: an empty list is '{}', not NULL
	for i := range batch {
		r := &batch[i]
		switch {
		case r.conv != nil:
			c := r.conv
			if j, ok := convs[c.ID]; ok {
				if c.CreatedAt.After(conv.updated[j]) {
					conv.updated[j] = c.CreatedAt
				}
				continue
			}
			convs[c.ID] = len(conv.id)
			conv.id, conv.owner = append(conv.id, c.ID), append(conv.owner, c.Owner)
			conv.created, conv.updated = append(conv.created, c.CreatedAt), append(conv.updated, c.CreatedAt)
		case r.msg != nil:
			m := r.msg
			if j, ok := msgs[msgKey{m.ConversationID, m.ID}]; ok {
				msg.content[j], msg.status[j], msg.updated[j] = m.Content, m.Status, r.enqueued
				if m.ReplacedByID != "" {
					msg.replaced[j] = m.ReplacedByID
				}
				if m.Author != "" {
					msg.author[j] = m.Author
				}
				continue
			}
			msgs[msgKey{m.ConversationID, m.ID}] = len(msg.id)
			msg.id, msg.conv, msg.prev = append(msg.id, m.ID), append(msg.conv, m.ConversationID), append(msg.prev, m.PreviousID)
			msg.role, msg.content, msg.status = append(msg.role, m.Role), append(msg.content, m.Content), append(msg.status, m.Status)
			msg.variant, msg.replaced = append(msg.variant, m.VariantOf), append(msg.replaced, m.ReplacedByID)
			msg.created, msg.updated = append(msg.created, m.CreatedAt), append(msg.updated, r.enqueued)
			msg.author = append(msg.author, m.Author)
		case r.step != nil:
			s := r.step
			if steps[s.id] {
				continue
			}
			steps[s.id] = true
			step.id, step.conv, step.msg, step.prev = append(step.id, s.id), append(step.conv, s.conversationID), append(step.msg, s.messageID), append(step.prev, s.previousID)
			step.index, step.content, step.sealed = append(step.index, s.index), append(step.content, s.content), append(step.sealed, s.sealed)
			step.encValue, step.toolCall, step.cut = append(step.encValue, s.encryptedValue), append(step.toolCall, s.toolCallID), append(step.cut, s.cutShort)
			step.started, step.ended = append(step.started, s.startedAt), append(step.ended, s.endedAt)
		case r.env != nil:
			e := r.env
			k := envKey{e.ConversationID, e.StanzaID}
			if envs[k] {
				continue
			}
			envs[k] = true
			n := int32(-1)
			if e.To != nil {
				n = int32(len(e.To))
			}
			env.conv, env.stanza, env.payload = append(env.conv, e.ConversationID), append(env.stanza, e.StanzaID), append(env.payload, e.Payload)
			env.encrypted, env.sent = append(env.encrypted, e.encrypted), append(env.sent, e.SentAt)
			env.first, env.n = append(env.first, int32(len(dests))), append(env.n, n)
			dests = append(dests, e.To...)
		}
	}
	b := &pgx.Batch{}
	if len(conv.id) > 0 {
		b.Queue(insertConversations, conv.id, conv.owner, conv.created, conv.updated)
	}
	if len(msg.id) > 0 {
		b.Queue(insertMessages, msg.id, msg.conv, msg.prev, msg.role, msg.content, msg.status, msg.variant, msg.replaced, msg.created, msg.updated, msg.author)
	}
	if len(step.id) > 0 {
		b.Queue(insertSteps, step.id, step.conv, step.msg, step.prev, step.index, step.content, step.sealed,
			step.encValue, step.toolCall, step.cut, step.started, step.ended)
	}
	if len(env.conv) > 0 {
		b.Queue(insertEnvelopes, env.conv, env.stanza, env.payload, env.encrypted, env.first, env.n, dests, env.sent)
	}
	if changed := historyChanged(msg.conv, step.conv); len(changed) > 0 {
		// Delivered at commit, with the rows.
		b.Queue(announceHistory, origin, changed)
	}
	return b
}

// announceHistory tells every store listening which conversations' messages
// or steps a batch wrote ("origin conversation"; Postgres sends each
// distinct payload of a transaction once).
const announceHistory = `SELECT pg_notify('` + historyChannel + `', $1 || ' ' || c) FROM unnest($2::text[]) AS c`

// historyChanged lists each conversation of convs once.
func historyChanged(convs ...[]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, list := range convs {
		for _, c := range list {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
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
