package room

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/httpjson"
	"github.com/alicia-voice/alicia/reasoning"

	"github.com/alicia-voice/alicia/wire"
)

// TokenTTL is how long a minted user token is valid.
const TokenTTL = 6 * time.Hour

type tokenRequest struct {
	Room     string `json:"room"`
	Identity string `json:"identity"`
	Name     string `json:"name"`
	// Features the client can display, and a preference to set: written
	// into the token's participant attributes, so the bot knows them
	// whenever it joins.
	Features            []string       `json:"features"`
	ReasoningPreference reasoning.Mode `json:"reasoningPreference"`
}

type tokenResponse struct {
	Token    string `json:"token"`
	URL      string `json:"url"`
	Room     string `json:"room"`
	Identity string `json:"identity"`
}

// UserToken mints a token for identity to join room, whose room
// configuration dispatches the agent when the join creates the room, with
// participant attributes (see AttrFeatures; nil for none), which the bot
// reads when it joins. The token lets its participant set its own
// attributes, so a client may change them later.
func UserToken(cfg Config, room, identity, name string, attrs map[string]string) (string, error) {
	cfg.withDefaults()
	grant := &auth.VideoGrant{RoomJoin: true, Room: room}
	grant.SetCanUpdateOwnMetadata(true)
	at := auth.NewAccessToken(cfg.APIKey, cfg.APISecret).
		SetIdentity(identity).SetName(name).SetValidFor(TokenTTL).
		SetVideoGrant(grant).
		SetRoomConfig(&livekit.RoomConfiguration{Agents: []*livekit.RoomAgentDispatch{{AgentName: cfg.AgentName}}})
	if len(attrs) > 0 {
		at.SetAttributes(attrs)
	}
	return at.ToJWT()
}

// TokenHandler serves POST /v1/token: {room?, identity, name?, features?,
// reasoningPreference?} → a user
// token for the room (a new conversation when room is empty). It is
// protected by the token secret (or the API secret) as a bearer token.
// When the room already exists without a bot (its bot crashed), it asks
// LiveKit for one again.
func (a *Agent) TokenHandler() http.Handler {
	rooms := lksdk.NewRoomServiceClient(a.cfg.httpURL(), a.cfg.APIKey, a.cfg.APISecret)
	secret := a.cfg.TokenSecret
	if secret == "" {
		secret = a.cfg.APISecret
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(status int, msg string) { httpjson.Error(w, status, msg) }
		given, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(given), []byte(secret)) != 1 {
			fail(http.StatusUnauthorized, "a valid bearer secret is required")
			return
		}
		var req tokenRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
			fail(http.StatusBadRequest, "body must be JSON: {\"identity\": …, \"room\": …}")
			return
		}
		if !roomNameOK(req.Identity) {
			fail(http.StatusBadRequest, "identity is required (no spaces or slashes, at most 128 characters)")
			return
		}
		if req.Room == "" {
			req.Room = wire.NewID("conv")
		} else if !roomNameOK(req.Room) {
			fail(http.StatusBadRequest, "room must have no spaces or slashes and at most 128 characters")
			return
		}
		attrs := map[string]string{}
		if req.Features != nil {
			for _, f := range req.Features {
				if f == "" || strings.ContainsAny(f, ", ") {
					fail(http.StatusBadRequest, "features are words without commas or spaces")
					return
				}
			}
			attrs[AttrFeatures] = strings.Join(req.Features, ",")
		}
		if req.ReasoningPreference != "" {
			if !req.ReasoningPreference.Valid() {
				fail(http.StatusBadRequest, "reasoningPreference is off, summary or full")
				return
			}
			attrs[AttrReasoningPreference] = string(req.ReasoningPreference)
		}
		token, err := UserToken(a.cfg, req.Room, req.Identity, req.Name, attrs)
		if err != nil {
			fail(http.StatusInternalServerError, err.Error())
			return
		}
		a.ensureBot(r.Context(), rooms, req.Room)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(tokenResponse{Token: token, URL: a.cfg.LiveKitURL, Room: req.Room, Identity: req.Identity})
	})
}

// ensureBot dispatches the agent to an existing room that has none. A new
// room gets its bot from the token's room configuration instead.
func (a *Agent) ensureBot(ctx context.Context, rooms *lksdk.RoomServiceClient, room string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
	if err != nil || len(res.Participants) == 0 {
		return
	}
	for _, p := range res.Participants {
		if p.Kind == livekit.ParticipantInfo_AGENT {
			return
		}
	}
	a.log.Info("room without a bot; dispatching one", "room", room)
	a.redispatch(room)
}
