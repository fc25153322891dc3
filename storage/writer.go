package storage

import (
	"context"
	"errors"
	"log/slog"

	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
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
