package room

import (
	"context"
	"net/http"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/webhook"
)

// WebhookHandler receives LiveKit's webhooks (livekit.yaml: webhook.urls
// naming this endpoint, behind whatever spreads requests over the Alicia
// processes; webhook.api_key the API key). When a bot leaves a room
// without saying goodbye — its process was killed, or lost its network —
// while a user is still there and no other bot is, it asks LiveKit to
// dispatch the agent again: a live worker takes the conversation over
// from storage, without the user doing anything. Two departures are
// left alone: a bot that stops cleanly leaves with CLIENT_INITIATED and
// has already re-dispatched its rooms itself (handOver), and a bot that
// leaves with DUPLICATE_IDENTITY was pushed out by the bot that took its
// room over, which LiveKit may not list yet: dispatching another then
// pushes that one out in the middle of its handshake.
func (a *Agent) WebhookHandler() http.Handler {
	keys := auth.NewSimpleKeyProvider(a.cfg.APIKey, a.cfg.APISecret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := webhook.ReceiveWebhookEvent(r, keys)
		if err != nil {
			http.Error(w, "webhook: "+err.Error(), http.StatusUnauthorized)
			return
		}
		p := ev.GetParticipant()
		if ev.GetEvent() != webhook.EventParticipantLeft || p.GetKind() != livekit.ParticipantInfo_AGENT || !lost(p.GetDisconnectReason()) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		a.takeOver(r.Context(), ev.GetRoom().GetName(), p)
		w.WriteHeader(http.StatusNoContent)
	})
}

// lost: a bot that left for reason left nobody to serve its room in its
// place.
func lost(reason livekit.DisconnectReason) bool {
	return reason != livekit.DisconnectReason_CLIENT_INITIATED && reason != livekit.DisconnectReason_DUPLICATE_IDENTITY
}

// takeOver dispatches the agent to a room whose bot vanished, if a user
// remains and no other bot is there.
func (a *Agent) takeOver(ctx context.Context, room string, gone *livekit.ParticipantInfo) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := a.rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
	if err != nil {
		a.log.Warn("bot left without handing over; cannot list the room", "room", room, "err", err)
		return
	}
	bot, users := parties(res.Participants, gone.GetSid())
	if bot || users == 0 {
		return // another bot is already there, or nobody to serve
	}
	a.log.Info("bot left without handing over; dispatching a new one", "room", room, "bot", gone.GetIdentity(),
		"reason", gone.GetDisconnectReason().String(), "users", users)
	a.metrics.jobs.WithLabelValues("taken_over").Inc()
	a.redispatch(room)
}
