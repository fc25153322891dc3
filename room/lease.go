package room

import (
	"context"
	"time"

	"github.com/livekit/protocol/livekit"
	gonanoid "github.com/matoous/go-nanoid/v2"

	"github.com/alicia-voice/alicia/storage"
)

// Leases is the shared record of which processes live and which rooms
// each serves (storage.Postgres). Without it, a killed process's rooms
// wait for LiveKit's participant_left webhook, which comes only once
// ICE has timed out (about 20 s).
type Leases interface {
	// RenewLease extends this process's lease and hands back the
	// expired leases of others, each to exactly one caller.
	RenewLease(ctx context.Context, agent string, lease storage.Lease, ttl time.Duration) ([]storage.Lease, error)
	EndLease(ctx context.Context, worker string) error
	// ServedElsewhere reports whether another live process's lease names
	// room.
	ServedElsewhere(ctx context.Context, agent, worker, room string) (bool, error)
}

// keepLease renews the process's lease until ctx ends, and takes over
// the rooms of every process whose lease lapsed.
func (a *Agent) keepLease(ctx context.Context) {
	t := time.NewTicker(a.cfg.LeaseTTL / 4)
	defer t.Stop()
	for {
		a.renew(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renew extends the lease to what this process serves now, and takes
// over the rooms of the leases that lapsed.
func (a *Agent) renew(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, a.cfg.LeaseTTL/4)
	expired, err := a.leases.RenewLease(rctx, a.cfg.AgentName, a.lease(), a.cfg.LeaseTTL)
	cancel()
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		a.log.Warn("renewing the lease failed; other processes take this one's rooms if it lapses", "err", err)
	}
	for _, l := range expired {
		a.log.Warn("a process's lease lapsed; dispatching its rooms again", "worker", l.Worker, "rooms", len(l.Rooms))
		// Not on the renewal's goroutine: a dead process's hundreds of
		// rooms must not hold this one's own renewals back until its
		// lease lapses too.
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for i, room := range l.Rooms {
				var bot string
				if i < len(l.Bots) {
					bot = l.Bots[i]
				}
				a.takeOverLapsed(ctx, room, bot)
			}
		}()
	}
}

// servedElsewhere reports whether another live process serves room,
// as its lease says; without leases, or when the store cannot say, no.
func (a *Agent) servedElsewhere(room string) bool {
	if a.leases == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(a.ctx, time.Second)
	defer cancel()
	held, err := a.leases.ServedElsewhere(ctx, a.cfg.AgentName, a.workerID, room)
	if err != nil {
		a.log.Warn("cannot tell from the leases whether another process serves the room; joining it", "room", room, "err", err)
		return false
	}
	return held
}

// lease is what this process serves now.
func (a *Agent) lease() storage.Lease {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := storage.Lease{Worker: a.workerID}
	for _, j := range a.jobs {
		r := j.conn.get()
		if r == nil || j.leaving.Load() {
			continue // not joined yet, or given up
		}
		l.Rooms = append(l.Rooms, j.room)
		l.Bots = append(l.Bots, r.LocalParticipant.SID())
	}
	return l
}

// takeOverLapsed dispatches a bot to a room a lapsed process served, if
// a user is still there and the only bot there is the lapsed one's (or
// none). The new bot joins under the same identity, so LiveKit removes
// the stale participant as it joins.
func (a *Agent) takeOverLapsed(ctx context.Context, room, staleBot string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := a.rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
	if err != nil {
		a.log.Warn("a lapsed process's room cannot be listed; leaving it to the webhook", "room", room, "err", err)
		return
	}
	bot, users := parties(res.Participants, staleBot)
	if bot || users == 0 {
		return // a live bot is there already, or nobody to serve
	}
	a.log.Info("taking over a room whose process's lease lapsed", "room", room, "users", users)
	a.metrics.jobs.WithLabelValues("taken_over").Inc()
	a.redispatch(room)
}

// endLease gives the lease up once the rooms were handed over, so that
// nobody takes them over again.
func (a *Agent) endLease(leases Leases) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := leases.EndLease(ctx, a.workerID); err != nil {
		a.log.Warn("ending the lease; other processes will find it lapsed and no room to take", "err", err)
	}
}

func newWorkerID() string {
	return "w_" + gonanoid.MustGenerate("abcdefghijklmnopqrstuvwxyz0123456789", 16)
}
