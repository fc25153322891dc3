package room

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/storage"
)

// Agent is a serving process's bot: the agent worker and the sessions of
// the rooms it was dispatched to.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	store    storage.Store
	metrics  *Metrics
	open     func(id string) Conversation
	worker   *worker
	dispatch *lksdk.AgentDispatchClient

	ctx  context.Context
	mu   sync.Mutex
	jobs map[string]*job
	wg   sync.WaitGroup
	// draining: stopping; new assignments are refused.
	draining bool
	// following holds the rooms whose dispatch is followed
	// (dispatch.go), one follower each: true once the room was
	// dispatched to again meanwhile, which starts its looks over.
	following map[string]bool
	// voice, if set, gives every room the voice path (EnableVoice).
	voice *VoiceConfig
	// leases, with a store that keeps them, and this process's name in
	// them.
	leases   Leases
	workerID string
	rooms    *lksdk.RoomServiceClient
}

// NewAgent prepares an agent; Run starts it.
// open gives the engine's side of a conversation (for pipeline.Engine:
// func(id string) Conversation { return e.Open(id) }).
func NewAgent(cfg Config, store storage.Store, metrics *Metrics, open func(id string) Conversation, log *slog.Logger) *Agent {
	cfg.withDefaults()
	a := &Agent{cfg: cfg, log: log, store: store, metrics: metrics, open: open, jobs: map[string]*job{}, following: map[string]bool{}}
	a.worker = newWorker(cfg.LiveKitURL, cfg.APIKey, cfg.APISecret, cfg.AgentName, "alicia", log)
	a.worker.available = a.available
	a.worker.assign = a.assign
	a.worker.load = a.load
	a.worker.onRegistered = a.adoptWaiting
	a.dispatch = lksdk.NewAgentDispatchServiceClient(cfg.httpURL(), cfg.APIKey, cfg.APISecret)
	a.rooms = lksdk.NewRoomServiceClient(cfg.httpURL(), cfg.APIKey, cfg.APISecret)
	a.leases, _ = store.(Leases)
	a.workerID = newWorkerID()
	return a
}

// Registered is closed once the worker first registered with LiveKit.
func (a *Agent) Registered() <-chan struct{} { return a.worker.registered }

// Run serves until ctx ends, then hands its rooms over to the other
// processes under the same agent name (through LiveKit's dispatch) and
// stops.
func (a *Agent) Run(ctx context.Context) {
	runCtx, cancel := context.WithCancel(context.Background())
	// Under the lock: a token request may open a room (joinOnToken) while
	// Run starts.
	a.mu.Lock()
	a.ctx = runCtx
	a.mu.Unlock()
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		a.worker.run(runCtx)
	}()
	stopLease := func() {}
	if a.leases != nil {
		leaseCtx, cancelLease := context.WithCancel(runCtx)
		leaseDone := make(chan struct{})
		go func() {
			defer close(leaseDone)
			a.keepLease(leaseCtx)
		}()
		stopLease = func() {
			cancelLease()
			<-leaseDone
			a.endLease(a.leases)
		}
	}
	<-ctx.Done()
	a.handOver(stopLease)
	cancel()
	<-workerDone
	a.wg.Wait()
}

// load is what the worker reports. LiveKit weighs workers by how far
// their load is below its target load and gives nothing to one at the
// target, so the share of MaxSessions in use is scaled to the target:
// the last conversation of the maximum is still dispatched here.
func (a *Agent) load() (load float32, jobs uint32, full bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.jobs)
	return float32(float64(min(n, a.cfg.MaxSessions)) / float64(a.cfg.MaxSessions) * a.cfg.TargetLoad), uint32(n), n >= a.cfg.MaxSessions
}

func (a *Agent) available(*livekit.Job) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	ok := !a.draining && len(a.jobs) < a.cfg.MaxSessions
	if !ok {
		a.metrics.jobs.WithLabelValues("refused").Inc()
		if !a.draining {
			a.log.Warn("worker full: a room was refused", "sessions", len(a.jobs), "max_sessions", a.cfg.MaxSessions)
		}
	}
	return ok
}

// assign joins the room of a job LiveKit dispatched here; the worker's
// read loop must not wait for it.
func (a *Agent) assign(lj *livekit.Job, token string) {
	j := &job{id: lj.Id, room: lj.Room.GetName(), ended: make(chan struct{}), dispatched: true}
	// LiveKit asked whether this process had room before it assigned the
	// job: it is not refused for being full now.
	if refusal := a.admit(j, false); refusal != "" {
		if refusal == refusedServed {
			// Its bot here is rejoining after a LiveKit restart (the
			// client's rejoin created the room again, which dispatched the
			// agent): a second bot would replace it, and a client resuming
			// would find nothing of what the first one's session keeps for
			// it.
			a.log.Info("this process serves the room already; the new job yields", "room", j.room, "job", j.id)
			a.metrics.jobs.WithLabelValues("yielded").Inc()
			a.worker.jobStatus(lj.Id, livekit.JobStatus_JS_SUCCESS, "served here already")
			return
		}
		a.worker.jobStatus(lj.Id, livekit.JobStatus_JS_FAILED, refusal)
		return
	}
	a.launch(j, token)
}

// Why admit refuses a job.
const (
	refusedStopping = "the process is stopping"
	refusedServed   = "served here already"
	refusedFull     = "the process is full"
)

// admit lists j among the process's jobs, or says why not: the process
// is stopping, serves j's room already, or (with whenFull) is full. An
// admitted job is counted in a.wg before the lock is let go, so that
// Run's wait, which comes after handOver has taken the lock, covers it.
func (a *Agent) admit(j *job, whenFull bool) (refusal string) {
	// Before the job is listed: the lease reads its connection.
	j.conn = a.connTo(j.room)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.draining || a.ctx == nil:
		return refusedStopping
	case a.serving(j.room):
		return refusedServed
	case whenFull && len(a.jobs) >= a.cfg.MaxSessions:
		return refusedFull
	}
	a.jobs[j.id] = j
	a.wg.Add(1)
	if len(a.jobs) == a.cfg.MaxSessions {
		// LiveKit sends no more rooms here until one ends: say why.
		a.log.Warn("worker full: no more rooms until a conversation ends; raise ALICIA_MAX_SESSIONS or start another process",
			"sessions", len(a.jobs), "max_sessions", a.cfg.MaxSessions)
	}
	return ""
}

// launch runs an admitted job, with the bot joining with token.
func (a *Agent) launch(j *job, token string) {
	a.metrics.jobs.WithLabelValues("accepted").Inc()
	a.worker.loadChanged()
	go func() {
		defer a.wg.Done()
		status, reason := a.runJob(j, token)
		a.drop(j)
		if j.dispatched {
			a.worker.jobStatus(j.id, status, reason)
		}
	}()
}

// drop unlists a job that ended or never started.
func (a *Agent) drop(j *job) {
	a.mu.Lock()
	delete(a.jobs, j.id)
	a.mu.Unlock()
	a.worker.loadChanged()
}

// serving reports whether a job of this process holds room and has not
// given it up. Under a.mu.
func (a *Agent) serving(room string) bool {
	for _, j := range a.jobs {
		if j.room == room && !j.leaving.Load() {
			return true
		}
	}
	return false
}

// giveUp hands a room the job lost to another bot: its lease stops naming
// it first, so that the new bot does not yield to this one.
func (a *Agent) giveUp(j *job) {
	j.leaving.Store(true)
	if a.leases != nil {
		ctx, cancel := context.WithTimeout(a.ctx, a.cfg.LeaseTTL)
		a.renew(ctx)
		cancel()
	}
	a.redispatch(j.room)
}

// handOver stops taking jobs, flushes storage so that the next bot
// continues the conversations where this one left them, and asks
// LiveKit to dispatch each room again: another process under the same
// agent name takes it over (and replaces this bot, whose identity it
// shares).
func (a *Agent) handOver(stopLease func()) {
	a.mu.Lock()
	a.draining = true
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	a.mu.Unlock()
	a.worker.drain()
	for _, j := range jobs {
		if sess := j.session.Load(); sess != nil {
			sess.Close()
		}
	}
	// Given up before the store closes: this process dispatches its rooms
	// itself, and nobody must take them over again.
	stopLease()
	flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := a.store.Close(flushCtx); err != nil {
		a.log.Error("flushing storage before handing rooms over", "err", err)
	}
	cancel()
	for _, j := range jobs {
		j.leaving.Store(true)
		a.redispatch(j.room)
		a.metrics.jobs.WithLabelValues("handed_over").Inc()
		close(j.ended)
	}
	if len(jobs) > 0 {
		a.log.Info("rooms handed over", "rooms", len(jobs))
	}
}

// sessions returns the live sessions.
func (a *Agent) sessions() []*Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*Session
	for _, j := range a.jobs {
		if sess := j.session.Load(); sess != nil {
			out = append(out, sess)
		}
	}
	return out
}

func roomNameOK(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsAny(s, "/\\ \t\n")
}
