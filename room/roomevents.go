package room

import (
	"log/slog"
	"maps"

	lksdk "github.com/livekit/server-sdk-go/v2"
)

// roomEvents maps the SDK's room callbacks to the session, the
// microphones and the job. The SDK calls them on its own goroutines:
// none of them blocks.
type roomEvents struct {
	log     *slog.Logger
	metrics *Metrics
	sess    *Session
	conn    *conn
	mics    *mics // nil without voice
	// humans holds the number of users in the room after the latest
	// arrival or departure; disconnected, why the SDK gave the room up.
	humans       chan int
	disconnected chan lksdk.DisconnectionReason
}

func (e *roomEvents) callback() *lksdk.RoomCallback {
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = e.dataPacket
	cb.OnParticipantConnected = e.participantConnected
	cb.OnParticipantDisconnected = e.participantDisconnected
	cb.OnAttributesChanged = e.attributesChanged
	cb.OnDisconnectedWithReason = e.disconnectedWithReason
	cb.OnReconnected = e.reconnected
	if e.mics != nil {
		cb.OnTrackPublished = e.mics.published
		cb.OnTrackSubscribed = e.mics.subscribed
		cb.OnTrackUnsubscribed = e.mics.unsubscribed
	}
	return cb
}

// reconnected: the SDK is back in the room. After a full rejoin (the
// LiveKit server restarted) it announces nobody who was there already,
// though their connections are new: each is announced here, and one whose
// connection changed is greeted again.
func (e *roomEvents) reconnected() {
	rejoined := e.conn.rejoined()
	if rejoined {
		e.log.Info("rejoined the room on a new connection: users are out of sync until their handshake")
	}
	e.sess.reconnected(rejoined)
	r := e.conn.get()
	if r == nil {
		return
	}
	for _, p := range r.GetRemoteParticipants() {
		if p.Kind() != lksdk.ParticipantAgent {
			e.sess.arrived(p.Identity(), p.Attributes())
		}
	}
	e.countHumans()
}

func (e *roomEvents) dataPacket(data lksdk.DataPacket, p lksdk.DataReceiveParams) {
	u, ok := data.(*lksdk.UserDataPacket)
	if !ok || !isAlicia(u.Topic) {
		return
	}
	if p.Sender != nil && p.Sender.Kind() == lksdk.ParticipantAgent {
		e.metrics.badInput.WithLabelValues("agent").Inc()
		return
	}
	e.sess.receive(p.SenderIdentity, u.Payload)
}

func (e *roomEvents) participantConnected(p *lksdk.RemoteParticipant) {
	e.log.Debug("participant connected", "identity", p.Identity(), "kind", p.Kind())
	if p.Kind() == lksdk.ParticipantAgent {
		return
	}
	e.sess.arrived(p.Identity(), p.Attributes())
	e.countHumans()
}

func (e *roomEvents) participantDisconnected(p *lksdk.RemoteParticipant) {
	e.log.Debug("participant disconnected", "identity", p.Identity())
	e.sess.left(p.Identity())
	e.countHumans()
}

// countHumans leaves the latest count for serveRoom, replacing one it
// has not read: only the latest matters, and the callback must not wait.
func (e *roomEvents) countHumans() {
	r := e.conn.get()
	if r == nil {
		return
	}
	n := countHumans(r)
	for {
		select {
		case e.humans <- n:
			return
		default:
		}
		select {
		case <-e.humans:
		default:
		}
	}
}

func (e *roomEvents) attributesChanged(changed map[string]string, p lksdk.Participant) {
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
	e.sess.attributesChanged(rp.Identity(), attrs)
}

func (e *roomEvents) disconnectedWithReason(reason lksdk.DisconnectionReason) {
	select {
	case e.disconnected <- reason:
	default:
	}
}

func countHumans(r *lksdk.Room) int {
	n := 0
	for _, p := range r.GetRemoteParticipants() {
		if p.Kind() != lksdk.ParticipantAgent {
			n++
		}
	}
	return n
}
