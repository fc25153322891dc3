package room

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"

	"github.com/alicia-voice/alicia/internal/provider"
)

// worker speaks LiveKit's agent protocol: it registers under an agent
// name, answers availability requests, takes job assignments and reports
// load and job status, so that LiveKit's dispatch (explicit, or from a
// token's room configuration) brings the bot into rooms and spreads rooms
// over every process registered under the same name.
type worker struct {
	url, apiKey, apiSecret, agentName, version string
	log                                        *slog.Logger

	// available decides whether to take a job; assign starts it.
	available func(job *livekit.Job) bool
	assign    func(job *livekit.Job, token string)
	// load reports the load to show LiveKit, the jobs held, and whether
	// no more can be taken.
	load func() (float32, uint32, bool)
	// onRegistered, if set, is called at every registration; it must
	// not block.
	onRegistered func()

	mu sync.Mutex
	// conn is the connection's outbox; nil while disconnected.
	conn *outbox
	// live: LiveKit has recorded this worker on conn (see handle).
	live    bool
	full    bool
	pending []*livekit.UpdateJobStatus // reported once reconnected
	changed chan struct{}
	// registered is closed at the first registration (tests wait on it).
	registered chan struct{}
	regOnce    sync.Once
	// registrations counts every registration, the first and each after
	// a reconnection.
	registrations atomic.Int64
	// confirming is the worker id of a registration LiveKit answered and
	// has yet to confirm (see handle); the read loop's alone.
	confirming string
}

func newWorker(lkURL, key, secret, agentName, version string, log *slog.Logger) *worker {
	return &worker{url: lkURL, apiKey: key, apiSecret: secret, agentName: agentName, version: version, log: log,
		changed: make(chan struct{}, 1), registered: make(chan struct{})}
}

// agentURL turns the LiveKit URL into the worker endpoint.
func agentURL(lkURL string) (string, error) {
	u, err := provider.WebSocketURL(lkURL)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/agent"
	return u.String(), nil
}

// run keeps the worker registered until ctx ends, reconnecting with
// backoff when the LiveKit server goes away.
func (w *worker) run(ctx context.Context) {
	b := policy()
	for ctx.Err() == nil {
		start := time.Now()
		err := w.serve(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			b.Reset() // a long healthy connection resets the backoff
		}
		wait := b.NextBackOff()
		w.log.Warn("agent worker disconnected; reconnecting", "in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
}

func (w *worker) serve(ctx context.Context) error {
	conn, err := w.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The read loop below ends when ctx ends, through this close.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	out := &outbox{frames: make(chan frame), closed: make(chan struct{})}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		out.run(conn)
	}()
	w.mu.Lock()
	w.conn = out
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.conn, w.live = nil, false
		w.mu.Unlock()
		close(out.closed)
		<-writerDone
	}()
	if err := w.write(&livekit.WorkerMessage{Message: &livekit.WorkerMessage_Register{Register: &livekit.RegisterWorkerRequest{
		Type: livekit.JobType_JT_ROOM, AgentName: w.agentName, Version: w.version,
		// The server mints the join token from these.
		AllowedPermissions: botPermissions(),
	}}}); err != nil {
		return err
	}
	statusDone := make(chan struct{})
	defer func() { <-statusDone }()
	statusCtx, stopStatus := context.WithCancel(ctx)
	defer stopStatus()
	go func() {
		defer close(statusDone)
		w.reportStatus(statusCtx)
	}()
	for {
		_, b, err := conn.ReadMessage()
		if err != nil {
			return err
		}
		msg := &livekit.ServerMessage{}
		if err := proto.Unmarshal(b, msg); err != nil {
			return fmt.Errorf("agent protocol: %w", err)
		}
		if err := w.handle(msg); err != nil {
			return err
		}
	}
}

// dial opens the worker connection to LiveKit.
func (w *worker) dial(ctx context.Context) (*websocket.Conn, error) {
	endpoint, err := agentURL(w.url)
	if err != nil {
		return nil, err
	}
	token, err := auth.NewAccessToken(w.apiKey, w.apiSecret).SetVideoGrant(&auth.VideoGrant{Agent: true}).SetValidFor(time.Hour).ToJWT()
	if err != nil {
		return nil, err
	}
	header := http.Header{"Authorization": []string{"Bearer " + token}}
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.DefaultDialer.DialContext(dialCtx, endpoint, header)
	return conn, err
}

// handle takes one message of the server's.
func (w *worker) handle(msg *livekit.ServerMessage) error {
	switch m := msg.Message.(type) {
	case *livekit.ServerMessage_Register:
		// LiveKit answers the registration before it records the worker:
		// a room made in between is dispatched to no one, and never again.
		// It reads this connection in order, so its answer to a ping sent
		// now comes once the worker is recorded; only then is the worker
		// registered, for those who wait on it and for adoptWaiting.
		w.confirming = m.Register.WorkerId
		w.flushPending()
		return w.write(&livekit.WorkerMessage{Message: &livekit.WorkerMessage_Ping{Ping: &livekit.WorkerPing{Timestamp: time.Now().UnixMilli()}}})
	case *livekit.ServerMessage_Pong:
		if w.confirming == "" {
			return nil
		}
		w.log.Info("agent worker registered", "worker", w.confirming, "agent", w.agentName)
		w.confirming = ""
		w.mu.Lock()
		w.live = true
		w.mu.Unlock()
		w.registrations.Add(1)
		w.regOnce.Do(func() { close(w.registered) })
		if w.onRegistered != nil {
			w.onRegistered()
		}
	case *livekit.ServerMessage_Availability:
		job := m.Availability.Job
		w.log.Debug("availability request", "job", job.Id, "room", job.Room.GetName())
		ok := w.available(job)
		return w.write(&livekit.WorkerMessage{Message: &livekit.WorkerMessage_Availability{Availability: &livekit.AvailabilityResponse{
			JobId: job.Id, Available: ok, ParticipantIdentity: BotIdentity, ParticipantName: botName,
		}}})
	case *livekit.ServerMessage_Assignment:
		w.assign(m.Assignment.Job, m.Assignment.Token)
	case *livekit.ServerMessage_Termination:
		w.log.Info("job terminated by the server", "job", m.Termination.JobId)
	}
	return nil
}

// botPermissions are the bot's in its rooms; updating its own attributes
// is how it publishes lk.agent.state.
func botPermissions() *livekit.ParticipantPermission {
	return &livekit.ParticipantPermission{CanSubscribe: true, CanPublish: true, CanPublishData: true, CanUpdateMetadata: true}
}

// botName is the bot's participant name.
const botName = "Alicia"

// BotIdentity is the bot's participant identity in every room. A bot that
// takes a room over replaces the previous one under the same identity.
const BotIdentity = "alicia"

var errWorkerDisconnected = errors.New("agent worker not connected")

// outbox is one connection's writer: a WebSocket takes one writer at a
// time, and a write may wait seconds on a slow network, which no caller
// should spend holding the worker's mutex.
type outbox struct {
	frames chan frame
	// closed is closed when the connection is done with.
	closed chan struct{}
}

// frame is an encoded message; sent gets its write's outcome.
type frame struct {
	b    []byte
	sent chan error
}

// run writes the frames until the connection is done with.
func (o *outbox) run(conn *websocket.Conn) {
	for {
		select {
		case f := <-o.frames:
			_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			f.sent <- conn.WriteMessage(websocket.BinaryMessage, f.b)
		case <-o.closed:
			return
		}
	}
}

// write sends m and returns once it was written, or failed.
func (w *worker) write(m *livekit.WorkerMessage) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	w.mu.Lock()
	out := w.conn
	w.mu.Unlock()
	if out == nil {
		return errWorkerDisconnected
	}
	f := frame{b: b, sent: make(chan error, 1)}
	select {
	case out.frames <- f:
	case <-out.closed:
		return errWorkerDisconnected
	}
	select {
	case err := <-f.sent:
		return err
	case <-out.closed:
		return errWorkerDisconnected
	}
}

// sendStatus reports the load and whether more jobs are welcome.
func (w *worker) sendStatus() error {
	load, jobs, full := w.load()
	w.mu.Lock()
	status := livekit.WorkerStatus_WS_AVAILABLE
	if w.full || full {
		status = livekit.WorkerStatus_WS_FULL
	}
	w.mu.Unlock()
	return w.write(&livekit.WorkerMessage{Message: &livekit.WorkerMessage_UpdateWorker{UpdateWorker: &livekit.UpdateWorkerStatus{
		Status: &status, Load: load, JobCount: jobs}}})
}

// reportStatus sends load now and then, and at once when it changes, so
// that LiveKit weighs this process fairly against the others.
func (w *worker) reportStatus(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		_ = w.sendStatus()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.changed:
		}
	}
}

// loadChanged asks for a status report now.
func (w *worker) loadChanged() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// drain stops new jobs from coming to this process. It returns once
// LiveKit was told, so that the rooms handed over next are not offered
// back to it.
func (w *worker) drain() {
	w.mu.Lock()
	w.full = true
	w.mu.Unlock()
	if err := w.sendStatus(); err != nil {
		w.log.Warn("agent worker: could not report that it takes no more jobs", "err", err)
	}
}

// jobStatus reports a job's state; while disconnected, the report waits
// for the next registration.
func (w *worker) jobStatus(jobID string, status livekit.JobStatus, reason string) {
	u := &livekit.UpdateJobStatus{JobId: jobID, Status: status, Error: reason}
	if err := w.write(&livekit.WorkerMessage{Message: &livekit.WorkerMessage_UpdateJob{UpdateJob: u}}); err != nil {
		w.mu.Lock()
		w.pending = append(w.pending, u)
		w.mu.Unlock()
	}
}

func (w *worker) flushPending() {
	w.mu.Lock()
	pending := w.pending
	w.pending = nil
	w.mu.Unlock()
	for _, u := range pending {
		w.jobStatus(u.JobId, u.Status, u.Error)
	}
}
