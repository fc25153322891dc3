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

	mu      sync.Mutex
	conn    *websocket.Conn
	full    bool
	pending []*livekit.UpdateJobStatus // reported once reconnected
	changed chan struct{}
	// registered is closed at the first registration (tests wait on it).
	registered chan struct{}
	regOnce    sync.Once
	// registrations counts every registration, the first and each after
	// a reconnection.
	registrations atomic.Int64
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
	endpoint, err := agentURL(w.url)
	if err != nil {
		return err
	}
	token, err := auth.NewAccessToken(w.apiKey, w.apiSecret).SetVideoGrant(&auth.VideoGrant{Agent: true}).SetValidFor(time.Hour).ToJWT()
	if err != nil {
		return err
	}
	header := http.Header{"Authorization": []string{"Bearer " + token}}
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, _, err := websocket.DefaultDialer.DialContext(dialCtx, endpoint, header)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	// The read loop below ends when ctx ends, through this close.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	w.mu.Lock()
	w.conn = conn
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.conn = nil
		w.mu.Unlock()
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
		switch m := msg.Message.(type) {
		case *livekit.ServerMessage_Register:
			w.log.Info("agent worker registered", "worker", m.Register.WorkerId, "agent", w.agentName)
			w.flushPending()
			w.registrations.Add(1)
			w.regOnce.Do(func() { close(w.registered) })
		case *livekit.ServerMessage_Availability:
			job := m.Availability.Job
			w.log.Debug("availability request", "job", job.Id, "room", job.Room.GetName())
			ok := w.available(job)
			if err := w.write(&livekit.WorkerMessage{Message: &livekit.WorkerMessage_Availability{Availability: &livekit.AvailabilityResponse{
				JobId: job.Id, Available: ok, ParticipantIdentity: BotIdentity, ParticipantName: botName,
			}}}); err != nil {
				return err
			}
		case *livekit.ServerMessage_Assignment:
			w.assign(m.Assignment.Job, m.Assignment.Token)
		case *livekit.ServerMessage_Termination:
			w.log.Info("job terminated by the server", "job", m.Termination.JobId)
		}
	}
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

func (w *worker) write(m *livekit.WorkerMessage) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		return errors.New("agent worker not connected")
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return w.conn.WriteMessage(websocket.BinaryMessage, b)
}

// reportStatus sends load now and then, and at once when it changes, so
// that LiveKit weighs this process fairly against the others.
func (w *worker) reportStatus(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		load, jobs, full := w.load()
		w.mu.Lock()
		status := livekit.WorkerStatus_WS_AVAILABLE
		if w.full || full {
			status = livekit.WorkerStatus_WS_FULL
		}
		w.mu.Unlock()
		_ = w.write(&livekit.WorkerMessage{Message: &livekit.WorkerMessage_UpdateWorker{UpdateWorker: &livekit.UpdateWorkerStatus{
			Status: &status, Load: load, JobCount: jobs}}})
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

// drain stops new jobs from coming to this process.
func (w *worker) drain() {
	w.mu.Lock()
	w.full = true
	w.mu.Unlock()
	w.loadChanged()
	time.Sleep(50 * time.Millisecond) // let the report leave before handing rooms over
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
