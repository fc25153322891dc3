package room

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"github.com/livekit/protocol/webhook"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
)

// LiveKit's webhook says a room's only bot left while a user stays. Only
// a bot that was lost has a new one dispatched: one that stopped cleanly
// dispatched its successor itself, and one pushed out under its identity
// by the bot that took its room over has that successor, though LiveKit
// may not list it yet. In CI the survivor that got such a webhook
// dispatched a third bot, which pushed the new one out mid-handshake and
// left the user's resume unanswered. The webhooks are signed as
// LiveKit's notifier signs them; the room has a user and no bot, so
// every webhook that is not left alone dispatches one.
func TestWebhookDispatchesOnlyForALostBot(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	e := startAgent(t, lk, storage.NewMemory(storage.ReasoningPlain))
	const conv = "conv_webhook"
	// A token without the agent's dispatch: the room stays without a bot.
	token, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("alice").
		SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: conv}).SetValidFor(time.Hour).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	user, err := lksdk.ConnectToRoomWithToken(lk.URL, token, lksdk.NewRoomCallback(), lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(user.Disconnect)

	handler := e.agent.WebhookHandler()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// botLeft has the webhook handled, signed as LiveKit signs it, and
	// returns the room's dispatches after it: the handler dispatches
	// before it answers.
	botLeft := func(reason livekit.DisconnectReason) int {
		t.Helper()
		body, err := protojson.Marshal(&livekit.WebhookEvent{
			Event: webhook.EventParticipantLeft,
			Room:  &livekit.Room{Name: conv},
			Participant: &livekit.ParticipantInfo{Sid: "PA_gone", Identity: BotIdentity,
				Kind: livekit.ParticipantInfo_AGENT, DisconnectReason: reason},
			CreatedAt: time.Now().Unix(),
		})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		signed, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetValidFor(time.Minute).
			SetSha256(base64.StdEncoding.EncodeToString(sum[:])).ToJWT()
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/livekit/webhook", bytes.NewReader(body))
		r.Header.Set("Authorization", signed)
		r.Header.Set("Content-Type", "application/webhook+json")
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		if w.Code != http.StatusNoContent {
			t.Fatalf("%s: the webhook was answered %d: %s", reason, w.Code, w.Body)
		}
		ds, err := e.agent.dispatches(ctx, conv)
		if err != nil {
			t.Fatal(err)
		}
		return len(ds)
	}
	for _, reason := range []livekit.DisconnectReason{livekit.DisconnectReason_CLIENT_INITIATED, livekit.DisconnectReason_DUPLICATE_IDENTITY} {
		if n := botLeft(reason); n != 0 {
			t.Fatalf("a bot that left with %s: %d dispatches", reason, n)
		}
	}
	if n := botLeft(livekit.DisconnectReason_SIGNAL_CLOSE); n != 1 {
		t.Fatalf("a bot lost with SIGNAL_CLOSE: %d dispatches, not 1", n)
	}
	if n := jobs(t, e, "taken_over"); n != 1 {
		t.Fatalf("%v rooms counted taken over, not 1", n)
	}
}
