package room

import (
	"context"
	"errors"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/twitchtv/twirp"
)

// LiveKit offers a dispatch to the workers under its agent name once,
// when it is made, and drops it when none takes it then: every process
// full, the only one restarting or between connections to LiveKit. The
// room waits for a bot that never comes. So a dispatch this process asks
// for is followed until a bot is in the room: looked at after each of
// followChecks, a room with no bot, and no job assigned to it lately, is
// dispatched to again.
var followChecks = []time.Duration{3 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second,
	30 * time.Second, 30 * time.Second, 30 * time.Second}

// jobJoinGrace is how long a job LiveKit assigned may take to bring its
// bot into the room before it counts as lost: LiveKit waits up to 10 s for
// a worker's answer, and a bot joins within a second or two of it.
const jobJoinGrace = 10 * time.Second

// redispatch asks LiveKit to send a bot to a room again, so that a
// conversation whose bot lost its room is re-joined, by this process or
// another, and follows that dispatch.
func (a *Agent) redispatch(room string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.createDispatch(ctx, room); err != nil {
		a.log.Error("could not ask for a new bot; the conversation waits for its user to request a token", "room", room, "err", err)
		return
	}
	a.followDispatch(room)
}

// createDispatch asks LiveKit to send this agent to room.
func (a *Agent) createDispatch(ctx context.Context, room string) error {
	_, err := a.dispatch.CreateDispatch(ctx, &livekit.CreateAgentDispatchRequest{AgentName: a.cfg.AgentName, Room: room})
	return err
}

// dispatches are the room's dispatches of this agent.
func (a *Agent) dispatches(ctx context.Context, room string) ([]*livekit.AgentDispatch, error) {
	res, err := a.dispatch.ListDispatch(ctx, &livekit.ListAgentDispatchRequest{Room: room})
	if err != nil {
		return nil, err
	}
	var ours []*livekit.AgentDispatch
	for _, d := range res.AgentDispatches {
		if d.AgentName == a.cfg.AgentName {
			ours = append(ours, d)
		}
	}
	return ours, nil
}

// followDispatch looks after a room this process asked LiveKit to send a
// bot to, until one is there, the room is gone, or the process stops. A
// stopping process follows nothing: its rooms are handed over. A room
// has one follower: two would each make the lost dispatch again, and
// the room would get two bots. A room dispatched to again while followed
// has its looks start over.
func (a *Agent) followDispatch(room string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.draining || a.ctx == nil {
		return
	}
	if _, ok := a.following[room]; ok {
		a.following[room] = true
		return
	}
	a.following[room] = false
	a.wg.Add(1)
	go a.follow(a.ctx, room)
}

// adoptWaiting looks once, at a registration of the worker, for rooms
// that asked LiveKit for this agent and hold users but no bot: LiveKit
// dropped their dispatch while no worker was registered under the name
// (every process restarting, or away from LiveKit) and does not offer it
// again to one that registers. A room whose token this process minted is
// followed already; this finds those whose tokens were minted elsewhere,
// by a stock starter's token server say, and follows them. Several
// processes that register at once may each ask again: the second bot
// yields to the first.
func (a *Agent) adoptWaiting() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.draining || a.ctx == nil {
		return
	}
	a.wg.Add(1)
	go func(ctx context.Context) {
		defer a.wg.Done()
		ctx, cancel := context.WithTimeout(ctx, adoptWithin)
		defer cancel()
		res, err := a.rooms.ListRooms(ctx, &livekit.ListRoomsRequest{})
		if err != nil {
			a.log.Warn("could not list the rooms to find those waiting for a bot", "err", err)
			return
		}
		// Each room's participants are asked for: the list's counts lag
		// by seconds, and a user who just came counts none.
		for _, r := range res.Rooms {
			if a.waitsForBot(ctx, r.Name) {
				a.log.Info("a room asked for this agent has no bot; following it", "room", r.Name)
				a.followDispatch(r.Name)
			}
		}
	}(a.ctx)
}

// adoptWithin bounds adoptWaiting's look at the rooms.
const adoptWithin = 30 * time.Second

// waitsForBot says whether room has users and no bot, and asked LiveKit
// for this agent.
func (a *Agent) waitsForBot(ctx context.Context, room string) bool {
	res, err := a.rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
	if err != nil {
		return false
	}
	if bot, users := parties(res.Participants, ""); bot || users == 0 {
		return false
	}
	return a.dispatchedTo(ctx, room)
}

// follow is a room's follower.
func (a *Agent) follow(ctx context.Context, room string) {
	defer a.wg.Done()
	defer func() {
		a.mu.Lock()
		delete(a.following, room)
		a.mu.Unlock()
	}()
	for i := 0; i < len(followChecks); i++ {
		t := time.NewTimer(followChecks[i])
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !a.awaitsBot(ctx, room) {
			return
		}
		a.mu.Lock()
		if a.following[room] {
			a.following[room], i = false, -1
		}
		a.mu.Unlock()
	}
	a.log.Warn("no bot came to a room dispatched to; it waits for its user to request a token", "room", room)
}

// awaitsBot looks at a followed room once, dispatching to it again if
// LiveKit lost its dispatch, and reports whether to look again.
func (a *Agent) awaitsBot(ctx context.Context, room string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := a.rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
	if err != nil {
		var te twirp.Error
		// Gone (deleted, or closed once empty); otherwise LiveKit may be
		// away for a moment.
		return !(errors.As(err, &te) && te.Code() == twirp.NotFound)
	}
	if bot, _ := parties(res.Participants, ""); bot {
		return false
	}
	a.mu.Lock()
	joining := a.serving(room)
	a.mu.Unlock()
	if joining {
		return true
	}
	lost, err := a.dispatches(ctx, room)
	if err != nil {
		return true
	}
	for _, d := range lost {
		for _, j := range d.GetState().GetJobs() {
			if time.Since(time.Unix(0, j.GetState().GetStartedAt())) < jobJoinGrace {
				return true // its bot is on its way
			}
		}
	}
	a.dispatchAgain(ctx, room, lost)
	return true
}

// dispatchAgain replaces the dispatches LiveKit lost, deleted so that the
// room lists one per bot asked for.
func (a *Agent) dispatchAgain(ctx context.Context, room string, lost []*livekit.AgentDispatch) {
	for _, d := range lost {
		if _, err := a.dispatch.DeleteDispatch(ctx, &livekit.DeleteAgentDispatchRequest{DispatchId: d.Id, Room: room}); err != nil {
			a.log.Debug("could not delete a lost dispatch", "room", room, "dispatch", d.Id, "err", err)
		}
	}
	a.log.Warn("LiveKit dropped the dispatch of a bot to a room; asking again", "room", room, "lost", len(lost))
	a.metrics.jobs.WithLabelValues("dispatched_again").Inc()
	if err := a.createDispatch(ctx, room); err != nil {
		a.log.Warn("could not dispatch again; looking later", "room", room, "err", err)
	}
}

// dispatchedTo reports whether LiveKit was asked to send this agent to
// room.
func (a *Agent) dispatchedTo(ctx context.Context, room string) bool {
	ours, err := a.dispatches(ctx, room)
	return err == nil && len(ours) > 0
}

// parties reads a room's participants: whether a bot other than the one
// whose sid is stale is there, and how many users.
func parties(ps []*livekit.ParticipantInfo, staleSid string) (bot bool, users int) {
	for _, p := range ps {
		switch {
		case p.Kind == livekit.ParticipantInfo_AGENT && p.Sid != staleSid:
			bot = true
		case p.Kind != livekit.ParticipantInfo_AGENT:
			users++
		}
	}
	return bot, users
}
