package room

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/pipeline/voice"
)

// job is one room the worker was given: its session, its connection,
// and ended, closed when the process hands the room over.
type job struct {
	id   string
	room string
	// session is set once the job starts serving; the agent reads it
	// from other goroutines (sessions, handOver).
	session atomic.Pointer[Session]
	conn    *conn
	ended   chan struct{}
	// leaving: the job gave its room up and asked for another bot; a
	// job for the same room no longer yields to it.
	leaving atomic.Bool
	// dispatched: LiveKit gave the job, and is told how it goes; the
	// others are rooms this process opened for a token (joinOnToken).
	dispatched bool
}

// runJob is one room's life: join, serve the conversation, leave.
func (a *Agent) runJob(j *job, token string) (livekit.JobStatus, string) {
	log := a.log.With("room", j.room, "job", j.id)
	assigned := time.Now()
	// A room this process opened has a new name: nobody else serves it.
	if j.dispatched && a.servedElsewhere(j.room) {
		// Its bot is rejoining after a LiveKit restart; a second bot would
		// replace it and lose what its session holds for the clients'
		// resume.
		log.Info("another process serves this room; standing by while it does")
		if serve, why := a.standBy(j, log); !serve {
			log.Info("this process yields the room", "why", why)
			a.metrics.jobs.WithLabelValues("yielded").Inc()
			return livekit.JobStatus_JS_SUCCESS, "another process serves the room"
		}
	}
	sess := newSession(a.ctx, SessionConfig{ID: j.room, Store: a.store, Open: a.open, Metrics: a.metrics, Logger: a.log,
		AssumeAfter: a.cfg.AssumeAfter, AssumedFeatures: a.cfg.AssumedFeatures}, j.conn)
	j.session.Store(sess)
	defer sess.Close()

	ev := &roomEvents{log: log, metrics: a.metrics, sess: sess, conn: j.conn,
		humans: make(chan int, 1), disconnected: make(chan lksdk.DisconnectionReason, 1)}
	var vj *voiceJob
	if a.voice != nil {
		vj = newVoiceJob(a.ctx, *a.voice, log)
		ev.mics = vj.mics
		defer vj.stop()
	}
	room, err := a.joinRoom(token, ev, vj)
	if err != nil {
		log.Error("joining the room", "err", err)
		a.metrics.jobs.WithLabelValues("failed").Inc()
		return livekit.JobStatus_JS_FAILED, "could not join: " + err.Error()
	}
	opened := j.attach(room)
	// The SDK gives up on a channel it cannot open after its connect
	// timeout, which bounds this wait.
	defer func() { <-opened }()
	// livekit-server announces a participant that publishes no track
	// only in the room's batched updates, every 3 s; an attribute change
	// is announced at once. The agent state is what LiveKit's client
	// components read anyway. With voice, listening comes once the
	// microphones are heard.
	state := voice.StateListening
	if vj != nil {
		state = voice.StateInitializing
	}
	sess.setAgentState(state)
	joined := time.Now()
	stopAwaiting := a.announcePresent(room, j.conn, sess, log)
	defer stopAwaiting()
	if vj != nil {
		vj.start(room, sess)
	}
	if j.dispatched {
		a.worker.jobStatus(j.id, livekit.JobStatus_JS_RUNNING, "")
	}
	log.Info("joined", "join", joined.Sub(assigned), "greeting", time.Since(joined))
	return a.serveRoom(j, room, ev)
}

// standByGrace is how long a job waits for the bot that another
// process's lease says serves its room to show up in it: after a
// LiveKit restart that bot's SDK rejoins within seconds. maxStandBy
// bounds the wait.
const (
	standByGrace = 10 * time.Second
	maxStandBy   = 2 * time.Minute
)

// standBy waits while another live process's lease names the job's
// room, and reports whether this job is to serve it after all: the
// other process let the room go, or no bot is in the room after
// standByGrace while a user is. The second case is a LiveKit node that
// stopped: LiveKit does not move rooms, so a user who came back through
// another node is in a new room of the same name on that node, and the
// old bot goes on trying to reconnect to the dead node for about a
// minute, then cannot ask for another bot through it. A bot the room
// lists is no reason to yield before maxStandBy: LiveKit may go on
// listing the old bot in that new room, for minutes, and the old
// process lets the room go when its SDK gives up. The room is looked at
// once a second; no event tells of a bot that never comes.
func (a *Agent) standBy(j *job, log *slog.Logger) (serve bool, why string) {
	began := time.Now()
	listed := true
	for a.servedElsewhere(j.room) {
		waited := time.Since(began)
		if waited >= maxStandBy {
			return false, "the other process kept the room"
		}
		bot, users, err := a.members(j.room)
		if err != nil && listed {
			// Once: it is asked again every second.
			log.Warn("cannot list the room's participants while standing by", "err", err)
		}
		if !bot && users > 0 && waited >= standByGrace {
			log.Info("the bot another process's lease names is not in the room; this one serves it")
			return true, ""
		}
		listed = err == nil
		again := time.NewTimer(time.Second)
		select {
		case <-again.C:
		case <-j.ended:
			again.Stop()
			return false, "the job ended"
		case <-a.ctx.Done():
			again.Stop()
			return false, "stopping"
		}
	}
	log.Info("the other process let the room go; this one serves it")
	return true, ""
}

// members tells whether a bot is in room, and how many users, as this
// process's LiveKit node lists them.
func (a *Agent) members(room string) (bot bool, users int, err error) {
	ctx, cancel := context.WithTimeout(a.ctx, 2*time.Second)
	defer cancel()
	res, err := a.rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
	if err != nil {
		return false, 0, err
	}
	for _, p := range res.Participants {
		if p.Kind == livekit.ParticipantInfo_AGENT {
			return true, users, nil
		}
		users++
	}
	return false, users, nil
}

// joinRoom joins ev's room as the bot. A loaded server can be slow to
// connect: it tries a few times before the job is reported failed. The
// stream handlers are in place before the join: a client sends its
// pre-connect recording as soon as it sees the bot, and a stream whose
// header comes before its handler is dropped.
func (a *Agent) joinRoom(token string, ev *roomEvents, vj *voiceJob) (*lksdk.Room, error) {
	sess := ev.sess
	return retry(a.ctx, ev.log, "joining the room", 3, func() (*lksdk.Room, error) {
		r := lksdk.NewRoom(ev.callback())
		_ = r.RegisterByteStreamHandler(Topic, func(sr *lksdk.ByteStreamReader, identity string) {
			sess.receive(identity, readStream(sr))
		})
		_ = r.RegisterTextStreamHandler(ChatTopic, func(tr *lksdk.TextStreamReader, identity string) {
			text := tr.ReadAll()
			if p := r.GetParticipantByIdentity(identity); p == nil || p.Kind() != lksdk.ParticipantAgent {
				sess.chat(identity, text)
			}
		})
		if vj != nil {
			vj.mics.pre.register(r)
		}
		return r, r.JoinWithToken(a.cfg.LiveKitURL, token, lksdk.WithAutoSubscribe(false), lksdk.WithConnectTimeout(15*time.Second))
	})
}

// attach gives the job's connection the room it joined and opens its data
// channel without holding up the greeting; the channel returned is closed
// once the data channel is open or given up.
func (j *job) attach(room *lksdk.Room) <-chan struct{} {
	self := room.LocalParticipant.SID()
	j.conn.mu.Lock()
	j.conn.room = room
	j.conn.self = self
	j.conn.mu.Unlock()
	opened := make(chan struct{})
	go func() {
		defer close(opened)
		j.conn.openDataChannel(room)
	}()
	return opened
}

// announcePresent gives the users already in the room the handshake now,
// so that nobody depends on who came first. Their attributes are here
// already, whatever they sent before the bot came. In a room that looks
// empty it looks for the first user (awaitFirstUser) until the returned
// stop is called.
func (a *Agent) announcePresent(room *lksdk.Room, c *conn, sess *Session, log *slog.Logger) (stop func()) {
	present := room.GetRemoteParticipants()
	log.Debug("participants at join", "n", len(present))
	for _, p := range present {
		if p.Kind() != lksdk.ParticipantAgent {
			sess.arrived(p.Identity(), p.Attributes())
		}
	}
	if len(present) > 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(a.ctx)
	found := make(chan struct{})
	go func() {
		defer close(found)
		awaitFirstUser(ctx, room, c, sess)
	}()
	return func() {
		cancel()
		<-found
	}
}

// firstUserWait and firstUserPoll: how long and how often a bot alone in
// its room asks LiveKit for its first user. LiveKit tells the room of a
// user who publishes no track only in its batched updates, every 3 s; a
// bot that came into a room opened ahead of its user (openRoom) would
// greet that user only then. Most users come within a second of their
// token.
const (
	firstUserWait = 5 * time.Second
	firstUserPoll = 40 * time.Millisecond
)

// awaitFirstUser announces to the session the room's first users whom the
// SDK has not announced yet, as soon as LiveKit lists them active (data
// reaches them), until one arrived either way, firstUserWait passed or ctx
// ended.
func awaitFirstUser(ctx context.Context, room *lksdk.Room, c *conn, sess *Session) {
	ctx, cancel := context.WithTimeout(ctx, firstUserWait)
	defer cancel()
	tick := time.NewTicker(firstUserPoll)
	defer tick.Stop()
	for countHumans(room) == 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ps, err := c.list(ctx)
		if err != nil {
			continue
		}
		found := false
		for _, p := range ps {
			if p.Kind == livekit.ParticipantInfo_AGENT || p.State != livekit.ParticipantInfo_ACTIVE {
				continue
			}
			found = true
			if room.GetParticipantByIdentity(p.Identity) == nil {
				sess.metrics.usersListed.Inc()
				c.listedUser(p.Identity, p.Sid)
				sess.arrived(p.Identity, p.Attributes)
			}
		}
		if found {
			return
		}
	}
}

// connTo is a connection to room, not joined yet, that reads its
// participants' attributes from LiveKit's API.
func (a *Agent) connTo(room string) *conn {
	rooms := lksdk.NewRoomServiceClient(a.cfg.httpURL(), a.cfg.APIKey, a.cfg.APISecret)
	topic := Topic
	return &conn{lookup: func(ctx context.Context, identity string) (map[string]string, error) {
		p, err := rooms.GetParticipant(ctx, &livekit.RoomParticipantIdentity{Room: room, Identity: identity})
		if err != nil {
			return nil, err
		}
		return p.Attributes, nil
	}, list: func(ctx context.Context) ([]*livekit.ParticipantInfo, error) {
		res, err := rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
		if err != nil {
			return nil, err
		}
		return res.Participants, nil
	}, viaServer: func(ctx context.Context, payload []byte, to []string) error {
		_, err := rooms.SendData(ctx, &livekit.SendDataRequest{Room: room, Data: payload, Kind: livekit.DataPacket_RELIABLE,
			DestinationIdentities: to, Topic: &topic})
		return err
	}, sentViaServer: a.metrics.viaServer}
}

// serveRoom waits for the room's end: nobody left in it for
// EmptyTimeout, the room lost or closed, or the process handing it over.
func (a *Agent) serveRoom(j *job, room *lksdk.Room, ev *roomEvents) (livekit.JobStatus, string) {
	empty := time.NewTimer(a.cfg.EmptyTimeout)
	if countHumans(room) > 0 {
		empty.Stop()
	}
	defer empty.Stop()
	for {
		select {
		case n := <-ev.humans:
			if n == 0 {
				empty.Reset(a.cfg.EmptyTimeout)
			} else {
				empty.Stop()
			}
		case <-empty.C:
			ev.log.Info("nobody left in the room; leaving")
			room.Disconnect()
			a.metrics.jobs.WithLabelValues("done").Inc()
			return livekit.JobStatus_JS_SUCCESS, ""
		case reason := <-ev.disconnected:
			// The SDK resumes and rejoins by itself; this is after it gave
			// up, or the room closed, or another bot took the room over.
			if reason == lksdk.DuplicateIdentity || reason == lksdk.RoomClosed || reason == lksdk.LeaveRequested {
				a.metrics.jobs.WithLabelValues("done").Inc()
				return livekit.JobStatus_JS_SUCCESS, ""
			}
			if room.DisconnectReason() == livekit.DisconnectReason_ROOM_DELETED {
				// An operator deleted the room (RoomService DeleteRoom): a
				// new dispatch would create it again.
				ev.log.Info("the room was deleted; leaving it deleted")
				a.metrics.jobs.WithLabelValues("done").Inc()
				return livekit.JobStatus_JS_SUCCESS, "room deleted"
			}
			ev.log.Warn("lost the room", "reason", reason)
			a.metrics.jobs.WithLabelValues("failed").Inc()
			a.giveUp(j)
			return livekit.JobStatus_JS_FAILED, fmt.Sprintf("disconnected: %v", reason)
		case <-j.ended:
			room.Disconnect()
			return livekit.JobStatus_JS_SUCCESS, "handed over"
		}
	}
}
