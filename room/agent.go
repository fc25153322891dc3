package room

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/storage"
)

// Config says where LiveKit is and how the bot presents itself. Every
// field is a flag, and an ALICIA_ environment variable of the same name
// (see Flags).
type Config struct {
	LiveKitURL string // ALICIA_LIVEKIT_URL
	APIKey     string // ALICIA_LIVEKIT_API_KEY
	APISecret  string // ALICIA_LIVEKIT_API_SECRET
	AgentName  string // ALICIA_AGENT_NAME
	HTTPAddr   string // ALICIA_HTTP_ADDR
	// TokenSecret protects POST /v1/token; empty means the API secret.
	TokenSecret string // ALICIA_TOKEN_SECRET
	// MaxSessions is the capacity reported to LiveKit as load.
	MaxSessions int // ALICIA_MAX_SESSIONS
	// TargetLoad is the livekit-server's agents.target_load (LiveKit's
	// default 0.7): LiveKit dispatches no job to a worker whose load has
	// reached it, so MaxSessions conversations are reported as this load.
	TargetLoad float64 // ALICIA_LIVEKIT_TARGET_LOAD
	// EmptyTimeout: how long the bot stays once every user has left.
	EmptyTimeout time.Duration
}

// Flags registers the configuration's flags on fs. There is no default
// key or secret: with no LiveKit URL, serve starts a livekit-server and
// makes its own; with one, Validate requires both.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.LiveKitURL, "livekit-url", "", "LiveKit server URL; empty starts a local livekit-server")
	fs.StringVar(&c.APIKey, "livekit-api-key", "", "LiveKit API key (required with -livekit-url)")
	fs.StringVar(&c.APISecret, "livekit-api-secret", "", "LiveKit API secret (required with -livekit-url)")
	fs.StringVar(&c.AgentName, "agent-name", "alicia", "agent name LiveKit dispatches; processes sharing it share the rooms")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:8080", "address of the HTTP API")
	fs.StringVar(&c.TokenSecret, "token-secret", "", "shared secret for POST /v1/token; default: the API secret")
	fs.IntVar(&c.MaxSessions, "max-sessions", 500, "conversations this process takes before it reports itself full")
	fs.Float64Var(&c.TargetLoad, "livekit-target-load", 0.7, "the livekit-server's agents.target_load: the load at which LiveKit stops dispatching")
	fs.DurationVar(&c.EmptyTimeout, "empty-timeout", 30*time.Second, "how long the bot stays in a room nobody is in")
}

// wellKnown are secrets published in LiveKit's and Alicia's documentation
// and examples: a deployment using one is open to anyone.
var wellKnown = []string{"secret", "devkey", "devsecret", "apisecret", "changeme", "password"}

// Validate fails closed on development credentials: with a LiveKit URL,
// the key and secret must be given, and neither the API secret nor the
// token secret may be a well-known default.
func (c *Config) Validate() error {
	if c.MaxSessions <= 0 {
		return fmt.Errorf("ALICIA_MAX_SESSIONS must be positive, not %d", c.MaxSessions)
	}
	if c.TargetLoad <= 0 || c.TargetLoad > 1 {
		return fmt.Errorf("ALICIA_LIVEKIT_TARGET_LOAD must be in (0, 1], not %v", c.TargetLoad)
	}
	if c.LiveKitURL == "" {
		return nil // serve starts its own livekit-server with fresh credentials
	}
	if c.APIKey == "" || c.APISecret == "" {
		return errors.New("ALICIA_LIVEKIT_URL is set, so ALICIA_LIVEKIT_API_KEY and ALICIA_LIVEKIT_API_SECRET (or -livekit-api-key and -livekit-api-secret) must be set too")
	}
	for name, v := range map[string]string{"ALICIA_LIVEKIT_API_SECRET": c.APISecret, "ALICIA_TOKEN_SECRET": c.TokenSecret} {
		if slices.Contains(wellKnown, strings.ToLower(v)) {
			return fmt.Errorf("%s is a well-known default (%q): anyone could mint tokens; set a secret of your own", name, v)
		}
	}
	return nil
}

func (c *Config) withDefaults() {
	if c.MaxSessions <= 0 {
		c.MaxSessions = 500
	}
	if c.TargetLoad <= 0 || c.TargetLoad > 1 {
		c.TargetLoad = 0.7
	}
	if c.EmptyTimeout <= 0 {
		c.EmptyTimeout = 30 * time.Second
	}
	if c.AgentName == "" {
		c.AgentName = "alicia"
	}
}

// httpURL is the LiveKit server's API URL.
func (c *Config) httpURL() string {
	u, err := url.Parse(c.LiveKitURL)
	if err != nil {
		return c.LiveKitURL
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	return u.String()
}

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
	// voice, if set, gives every room the voice path (EnableVoice).
	voice *VoiceConfig
}

type job struct {
	id      string
	room    string
	session *Session
	conn    *conn
	ended   chan struct{}
}

// NewAgent prepares an agent; Run starts it.
// open gives the engine's side of a conversation (for pipeline.Engine:
// func(id string) Conversation { return e.Open(id) }).
func NewAgent(cfg Config, store storage.Store, metrics *Metrics, open func(id string) Conversation, log *slog.Logger) *Agent {
	cfg.withDefaults()
	a := &Agent{cfg: cfg, log: log, store: store, metrics: metrics, open: open, jobs: map[string]*job{}}
	a.worker = newWorker(cfg.LiveKitURL, cfg.APIKey, cfg.APISecret, cfg.AgentName, "alicia", log)
	a.worker.available = a.available
	a.worker.assign = a.assign
	a.worker.load = a.load
	a.dispatch = lksdk.NewAgentDispatchServiceClient(cfg.httpURL(), cfg.APIKey, cfg.APISecret)
	return a
}

// Registered is closed once the worker first registered with LiveKit.
func (a *Agent) Registered() <-chan struct{} { return a.worker.registered }

// Run serves until ctx ends, then hands its rooms over to the other
// processes under the same agent name (through LiveKit's dispatch) and
// stops.
func (a *Agent) Run(ctx context.Context) {
	runCtx, cancel := context.WithCancel(context.Background())
	a.ctx = runCtx
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		a.worker.run(runCtx)
	}()
	<-ctx.Done()
	a.handOver()
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

// assign joins the job's room; the worker's read loop must not wait for
// it.
func (a *Agent) assign(lj *livekit.Job, token string) {
	a.mu.Lock()
	if a.draining {
		a.mu.Unlock()
		a.worker.jobStatus(lj.Id, livekit.JobStatus_JS_FAILED, "the process is stopping")
		return
	}
	j := &job{id: lj.Id, room: lj.Room.GetName(), ended: make(chan struct{})}
	a.jobs[j.id] = j
	if len(a.jobs) == a.cfg.MaxSessions {
		// LiveKit sends no more rooms here until one ends: say why.
		a.log.Warn("worker full: no more rooms until a conversation ends; raise ALICIA_MAX_SESSIONS or start another process",
			"sessions", len(a.jobs), "max_sessions", a.cfg.MaxSessions)
	}
	a.mu.Unlock()
	a.metrics.jobs.WithLabelValues("accepted").Inc()
	a.worker.loadChanged()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		status, reason := a.runJob(j, token)
		a.mu.Lock()
		delete(a.jobs, j.id)
		a.mu.Unlock()
		a.worker.loadChanged()
		a.worker.jobStatus(j.id, status, reason)
	}()
}

// AgentStateAttribute is the participant attribute in which LiveKit
// agents publish their state (initializing, listening, thinking,
// speaking), as LiveKit's client components read it.
const AgentStateAttribute = "lk.agent.state"

// runJob is one room's life: join, serve the conversation, leave.
func (a *Agent) runJob(j *job, token string) (livekit.JobStatus, string) {
	log := a.log.With("room", j.room, "job", j.id)
	assigned := time.Now()
	rooms := lksdk.NewRoomServiceClient(a.cfg.httpURL(), a.cfg.APIKey, a.cfg.APISecret)
	j.conn = &conn{lookup: func(ctx context.Context, identity string) (map[string]string, error) {
		p, err := rooms.GetParticipant(ctx, &livekit.RoomParticipantIdentity{Room: j.room, Identity: identity})
		if err != nil {
			return nil, err
		}
		return p.Attributes, nil
	}}
	sess := newSession(a.ctx, SessionConfig{ID: j.room, Store: a.store, Open: a.open, Metrics: a.metrics, Logger: a.log}, j.conn)
	j.session = sess
	defer sess.Close()

	disconnected := make(chan lksdk.DisconnectionReason, 1)
	humans := make(chan int, 16)
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, p lksdk.DataReceiveParams) {
		u, ok := data.(*lksdk.UserDataPacket)
		if !ok || !isAlicia(u.Topic) {
			return
		}
		if p.Sender != nil && p.Sender.Kind() == lksdk.ParticipantAgent {
			a.metrics.badInput.WithLabelValues("agent").Inc()
			return
		}
		sess.receive(p.SenderIdentity, u.Payload)
	}
	countHumans := func(r *lksdk.Room) int {
		n := 0
		for _, p := range r.GetRemoteParticipants() {
			if p.Kind() != lksdk.ParticipantAgent {
				n++
			}
		}
		return n
	}
	cb.OnParticipantConnected = func(p *lksdk.RemoteParticipant) {
		log.Debug("participant connected", "identity", p.Identity(), "kind", p.Kind())
		if p.Kind() == lksdk.ParticipantAgent {
			return
		}
		sess.arrived(p.Identity(), p.Attributes())
		if r := j.conn.get(); r != nil {
			humans <- countHumans(r)
		}
	}
	cb.OnParticipantDisconnected = func(p *lksdk.RemoteParticipant) {
		log.Debug("participant disconnected", "identity", p.Identity())
		sess.left(p.Identity())
		if r := j.conn.get(); r != nil {
			humans <- countHumans(r)
		}
	}
	cb.OnAttributesChanged = func(changed map[string]string, p lksdk.Participant) {
		rp, ok := p.(*lksdk.RemoteParticipant)
		if !ok || rp.Kind() == lksdk.ParticipantAgent {
			return
		}
		attrs := maps.Clone(rp.Attributes())
		if _, ok := changed[AttrReasoningPreference]; !ok {
			// The preference is set when the client sets it, not again
			// whenever another attribute changes (it may have been changed
			// since, through the HTTP API).
			delete(attrs, AttrReasoningPreference)
		}
		sess.attributesChanged(rp.Identity(), attrs)
	}
	cb.OnDisconnectedWithReason = func(reason lksdk.DisconnectionReason) {
		select {
		case disconnected <- reason:
		default:
		}
	}
	var vj *voiceJob
	if a.voice != nil {
		vj = newVoiceJob(a.ctx, *a.voice, log)
		vj.mics.Bind(cb)
		defer vj.stop()
	}
	// A loaded server can be slow to connect: try a few times before the
	// job is reported failed.
	room, err := retry(a.ctx, log, "joining the room", 3, func() (*lksdk.Room, error) {
		return lksdk.ConnectToRoomWithToken(a.cfg.LiveKitURL, token, cb, lksdk.WithAutoSubscribe(false), lksdk.WithConnectTimeout(15*time.Second))
	})
	if err != nil {
		log.Error("joining the room", "err", err)
		a.metrics.jobs.WithLabelValues("failed").Inc()
		return livekit.JobStatus_JS_FAILED, "could not join: " + err.Error()
	}
	j.conn.mu.Lock()
	j.conn.room = room
	j.conn.mu.Unlock()
	_ = room.RegisterByteStreamHandler(Topic, func(r *lksdk.ByteStreamReader, identity string) {
		sess.receive(identity, readStream(r))
	})
	// livekit-server announces a participant that publishes no track
	// only in the room's batched updates, every 3 s; an attribute change
	// is announced at once. The agent state is what LiveKit's client
	// components read anyway. With voice, listening comes once the
	// microphones are heard.
	state := voice.StateListening
	if vj != nil {
		state = voice.StateInitializing
	}
	SetAgentState(room.LocalParticipant, state)
	// Users already in the room get the handshake now, so that nobody
	// depends on who came first.
	joined := time.Now()
	present := room.GetRemoteParticipants()
	log.Debug("participants at join", "n", len(present))
	for _, p := range present {
		if p.Kind() != lksdk.ParticipantAgent {
			// Their attributes are here already, whatever they sent
			// before the bot came.
			sess.arrived(p.Identity(), p.Attributes())
		}
	}
	if vj != nil {
		vj.start(room, sess)
	}
	a.worker.jobStatus(j.id, livekit.JobStatus_JS_RUNNING, "")
	log.Info("joined", "join", joined.Sub(assigned), "greeting", time.Since(joined))

	empty := time.NewTimer(a.cfg.EmptyTimeout)
	if countHumans(room) > 0 {
		empty.Stop()
	}
	defer empty.Stop()
	for {
		select {
		case n := <-humans:
			if n == 0 {
				empty.Reset(a.cfg.EmptyTimeout)
			} else {
				empty.Stop()
			}
		case <-empty.C:
			log.Info("nobody left in the room; leaving")
			room.Disconnect()
			a.metrics.jobs.WithLabelValues("done").Inc()
			return livekit.JobStatus_JS_SUCCESS, ""
		case reason := <-disconnected:
			// The SDK resumes and rejoins by itself; this is after it gave
			// up, or the room closed, or another bot took the room over.
			if reason == lksdk.DuplicateIdentity || reason == lksdk.RoomClosed || reason == lksdk.LeaveRequested {
				a.metrics.jobs.WithLabelValues("done").Inc()
				return livekit.JobStatus_JS_SUCCESS, ""
			}
			if room.DisconnectReason() == livekit.DisconnectReason_ROOM_DELETED {
				// An operator deleted the room (RoomService DeleteRoom): a
				// new dispatch would create it again.
				log.Info("the room was deleted; leaving it deleted")
				a.metrics.jobs.WithLabelValues("done").Inc()
				return livekit.JobStatus_JS_SUCCESS, "room deleted"
			}
			log.Warn("lost the room", "reason", reason)
			a.metrics.jobs.WithLabelValues("failed").Inc()
			a.redispatch(j.room)
			return livekit.JobStatus_JS_FAILED, fmt.Sprintf("disconnected: %v", reason)
		case <-j.ended:
			room.Disconnect()
			return livekit.JobStatus_JS_SUCCESS, "handed over"
		}
	}
}

// redispatch asks LiveKit to send a bot to a room again, so that a
// conversation whose bot lost its room is re-joined, by this process or
// another.
func (a *Agent) redispatch(room string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.dispatch.CreateDispatch(ctx, &livekit.CreateAgentDispatchRequest{AgentName: a.cfg.AgentName, Room: room}); err != nil {
		a.log.Error("could not ask for a new bot; the conversation waits for its user to request a token", "room", room, "err", err)
	}
}

// handOver stops taking jobs, flushes storage so that the next bot
// continues the conversations where this one left them, and asks
// LiveKit to dispatch each room again: another process under the same
// agent name takes it over (and replaces this bot, whose identity it
// shares).
func (a *Agent) handOver() {
	a.mu.Lock()
	a.draining = true
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	a.mu.Unlock()
	a.worker.drain()
	for _, j := range jobs {
		if j.session != nil {
			j.session.Close()
		}
	}
	flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := a.store.Close(flushCtx); err != nil {
		a.log.Error("flushing storage before handing rooms over", "err", err)
	}
	cancel()
	for _, j := range jobs {
		a.redispatch(j.room)
		a.metrics.jobs.WithLabelValues("handed_over").Inc()
		close(j.ended)
	}
	if len(jobs) > 0 {
		a.log.Info("rooms handed over", "rooms", len(jobs))
	}
}

// Sessions returns the live sessions (for tests and metrics).
func (a *Agent) Sessions() []*Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*Session
	for _, j := range a.jobs {
		if j.session != nil {
			out = append(out, j.session)
		}
	}
	return out
}

func roomNameOK(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsAny(s, "/\\ \t\n")
}
