package room

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	protoagent "github.com/livekit/protocol/agent"
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
		SetRoomConfig(&livekit.RoomConfiguration{Agents: cfg.roomAgents()})
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
//
// Wrong secrets are limited per client address (see failureLimiter): an
// address that spent its failures is answered 429 with Retry-After, before
// its secret is compared, until it may try again. The right secret spends
// nothing. Behind a proxy that is not trusted (Config.TrustForwardedFor)
// every client has the proxy's address and shares its limit.
func (a *Agent) TokenHandler() http.Handler { return a.tokenHandler(time.Now, nil) }

// tokenHandler is TokenHandler with the limiter's clock, and compared,
// when not nil, called after a secret was compared and before what that
// costs is settled: a test holds requests there to find out how many get
// that far at once.
func (a *Agent) tokenHandler(now func() time.Time, compared func()) http.Handler {
	rooms := lksdk.NewRoomServiceClient(a.cfg.httpURL(), a.cfg.APIKey, a.cfg.APISecret)
	secret := a.cfg.TokenSecret
	if secret == "" {
		secret = a.cfg.APISecret
	}
	failures := newFailureLimiter(a.cfg.TokenFailureBurst, a.cfg.TokenFailureEvery, failureAddressesMax, now)
	// Said once per handler: the setting is the same for every request.
	var proxyWarning sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.cfg.TrustForwardedFor && proxied(r) {
			proxyWarning.Do(func() {
				a.log.Warn("X-Forwarded-For from a loopback or private address, which is not trusted: wrong token secrets are limited per proxy address, so one client behind the proxy can lock every other out; set ALICIA_TRUST_FORWARDED_FOR=true if that proxy is the only way in",
					"proxy", r.RemoteAddr)
			})
		}
		if !a.authorizeToken(w, r, failures, secret, compared) {
			return
		}
		req, msg := decodeTokenRequest(w, r)
		if msg != "" {
			httpjson.Error(w, http.StatusBadRequest, msg)
			return
		}
		newRoom := req.Room == ""
		if newRoom {
			req.Room = wire.NewID("conv")
		} else if !roomNameOK(req.Room) {
			httpjson.Error(w, http.StatusBadRequest, "room must have no spaces or slashes and at most 128 characters")
			return
		}
		attrs, msg := tokenAttributes(req)
		if msg != "" {
			httpjson.Error(w, http.StatusBadRequest, msg)
			return
		}
		a.issueToken(w, r, rooms, req, newRoom, attrs)
	})
}

// authorizeToken spends one of the client address's tries and compares
// its bearer secret with secret; a request it refuses has been answered.
// The try is spent before the secret is compared, in one locked step with
// the check, so that parallel guesses are counted one by one; the right
// secret gets its try back.
func (a *Agent) authorizeToken(w http.ResponseWriter, r *http.Request, failures *failureLimiter, secret string, compared func()) bool {
	addr := clientAddress(r, a.cfg.TrustForwardedFor)
	refund, wait, last := failures.take(addr)
	if wait > 0 {
		a.metrics.tokenRefused.Inc()
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		httpjson.Error(w, http.StatusTooManyRequests, "too many wrong secrets from this address; try again after Retry-After seconds")
		return false
	}
	given, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	right := subtle.ConstantTimeCompare([]byte(given), []byte(secret)) == 1
	if compared != nil {
		compared()
	}
	if !right {
		if last {
			a.log.Warn("wrong token secrets from one address: throttled", "address", addr)
		}
		httpjson.Error(w, http.StatusUnauthorized, "a valid bearer secret is required")
		return false
	}
	refund()
	return true
}

// decodeTokenRequest reads the request's body, or says why it cannot be
// served (a 400).
func decodeTokenRequest(w http.ResponseWriter, r *http.Request) (tokenRequest, string) {
	var req tokenRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		return req, "body must be JSON: {\"identity\": …, \"room\": …}"
	}
	if !roomNameOK(req.Identity) {
		return req, "identity is required (no spaces or slashes, at most 128 characters)"
	}
	return req, ""
}

// tokenAttributes are the participant attributes req asks the token to
// carry, or why they cannot be (a 400). Features are joined with commas,
// so no feature may hold one.
func tokenAttributes(req tokenRequest) (map[string]string, string) {
	attrs := map[string]string{}
	if req.Features != nil {
		for _, f := range req.Features {
			if f == "" || strings.ContainsAny(f, ", ") {
				return nil, "features are words without commas or spaces"
			}
		}
		attrs[AttrFeatures] = strings.Join(req.Features, ",")
	}
	if req.ReasoningPreference != "" {
		if !req.ReasoningPreference.Valid() {
			return nil, "reasoningPreference is off, summary or full"
		}
		attrs[AttrReasoningPreference] = string(req.ReasoningPreference)
	}
	return attrs, ""
}

// issueToken mints the user's token and answers with it, after opening
// its room (newRoom) or asking for a bot for a room that lost its own, so
// that the bot is on its way before the user joins.
func (a *Agent) issueToken(w http.ResponseWriter, r *http.Request, rooms *lksdk.RoomServiceClient, req tokenRequest, newRoom bool, attrs map[string]string) {
	token, err := UserToken(a.cfg, req.Room, req.Identity, req.Name, attrs)
	if err != nil {
		httpjson.Error(w, http.StatusInternalServerError, err.Error())
		return
	}
	if newRoom {
		a.openRoom(r.Context(), rooms, req.Room)
	} else {
		a.ensureBot(r.Context(), rooms, req.Room)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(tokenResponse{Token: token, URL: a.cfg.LiveKitURL, Room: req.Room, Identity: req.Identity})
}

// openRoom creates a new conversation's room before its user has the
// token. Unless DispatchOnly, with room for one more conversation, this
// process's bot joins it at once: LiveKit hands a dispatched job to a
// worker only some 200 ms after the room is created (its RPC waits that
// long for better offers than the first), most of a user's wait for the
// greeting. Otherwise the room is created with the agent dispatched,
// which overlaps that wait with the user's own join, and the dispatch is
// followed in case LiveKit drops it (followDispatch). Either way the bot
// may be in the room first: awaitFirstUser finds the user. Should the
// room not be created, the token's room configuration dispatches the bot
// when the user's join creates it, only later.
func (a *Agent) openRoom(ctx context.Context, rooms *lksdk.RoomServiceClient, room string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	j, token := a.joinOnToken(room)
	req := &livekit.CreateRoomRequest{Name: room}
	if j == nil {
		req.Agents = a.cfg.roomAgents()
	}
	if _, err := rooms.CreateRoom(ctx, req); err != nil {
		a.log.Warn("could not open the room ahead of its user; the user's join will", "room", room, "err", err)
		if j != nil {
			a.drop(j)
			a.wg.Done()
		}
		return
	}
	if j != nil {
		a.launch(j, token)
		return
	}
	a.followDispatch(room)
}

// joinOnToken admits a job for a room this process opens, with the bot's
// token for it, or returns nil when the room is left to LiveKit's
// dispatch.
func (a *Agent) joinOnToken(room string) (*job, string) {
	if a.cfg.DispatchOnly {
		return nil, ""
	}
	token, err := protoagent.BuildAgentToken(a.cfg.APIKey, a.cfg.APISecret, room, BotIdentity, botName, "",
		map[string]string{lkAgentNameAttr: a.cfg.AgentName}, botPermissions())
	if err != nil {
		a.log.Error("minting the bot's token; the room is left to LiveKit's dispatch", "room", room, "err", err)
		return nil, ""
	}
	j := &job{id: wire.NewID("job"), room: room, ended: make(chan struct{})}
	if refusal := a.admit(j, true); refusal != "" {
		a.log.Debug("the room is left to LiveKit's dispatch", "room", room, "why", refusal)
		return nil, ""
	}
	return j, token
}

// stored reports whether room holds a conversation the store knows: it
// had a bot.
func (a *Agent) stored(ctx context.Context, room string) bool {
	_, err := a.store.Conversation(ctx, room)
	return err == nil
}

// lkAgentNameAttr is the attribute LiveKit gives a dispatched agent's
// participant, its agent name; a bot that joins on its own has it too.
const lkAgentNameAttr = "lk.agent_name"

// ensureBot dispatches the agent to an existing room that has none. A new
// room gets its bot when openRoom creates it.
func (a *Agent) ensureBot(ctx context.Context, rooms *lksdk.RoomServiceClient, room string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	// A room that is not there is created by the user's join, which
	// dispatches the bot through the token's room configuration. An empty
	// room that is there gets no dispatch from a join: LiveKit dispatches
	// a room's agents once, when it creates it. One that was given this
	// agent then, or that holds a stored conversation, and has no bot lost
	// it (its LiveKit node stopped, or the job found the room served
	// elsewhere, and its users left to look for one): it gets another now.
	// A room LiveKit kept through its node's stop had no dispatch there:
	// its bot joined on its own, and a client that comes back to it, waits
	// for a greeting and leaves keeps it from ever being new again. A
	// room created for something else, without the agent, waits for its
	// user.
	res, err := rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: room})
	if err != nil || (len(res.Participants) == 0 && !a.dispatchedTo(ctx, room) && !a.stored(ctx, room)) {
		return
	}
	if bot, _ := parties(res.Participants, ""); bot {
		return
	}
	a.log.Info("room without a bot; dispatching one", "room", room)
	a.redispatch(room)
}
