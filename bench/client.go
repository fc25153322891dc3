package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/wire"
)

// user is one conversation's client: a LiveKit participant speaking the
// Alicia protocol, as a web or mobile client does.
type user struct {
	name   string
	room   *lksdk.Room
	convID string
	stanza int32

	mu      sync.Mutex
	got     []arrival
	notify  chan struct{}
	joined  time.Time
	greeted time.Time
	// reconnecting and lost: when the SDK began resuming a broken
	// connection, and when it gave up.
	reconnecting, lost time.Time
	lostReason         lksdk.DisconnectionReason
	// gone is closed when the SDK has given the room up.
	gone     chan struct{}
	goneOnce sync.Once
	// closeTracks stops the tracks a voice user listens to.
	closeTracks func()
	// streamed: the reasoning streams a -streams user read.
	streamed []streamClose
}

// leave disconnects the user and stops what it listened to.
func (u *user) leave() {
	u.room.Disconnect()
	if u.closeTracks != nil {
		u.closeTracks()
	}
}

type arrival struct {
	at    time.Time
	bytes int
	env   *wire.Envelope
}

// turnResult is what a user saw of one turn.
type turnResult struct {
	question string
	sent     time.Time
	steps    map[int32]time.Time // final ReasoningStep by index
	// sentences in order, with their arrival.
	sentences []arrival
	packets   int
	bytes     int
	err       string
}

func requestToken(ctx context.Context, api, secret, identity, roomName string) (token, lkURL, room string, err error) {
	body, _ := json.Marshal(map[string]string{"identity": identity, "room": roomName})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/token", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", "", err
	}
	defer resp.Body.Close()
	var tok struct{ Token, URL, Room, Error string }
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK {
		return "", "", "", fmt.Errorf("token: HTTP %d %s %v", resp.StatusCode, tok.Error, err)
	}
	return tok.Token, tok.URL, tok.Room, nil
}

// join asks the bot's HTTP API for a token for a new conversation, joins
// the room it names and waits for the bot's greeting.
func join(ctx context.Context, api, secret, identity string, features []string) (*user, error) {
	return joinRoom(ctx, api, secret, identity, "", features)
}

// joinRoom is join for a given room; empty is a new conversation.
func joinRoom(ctx context.Context, api, secret, identity, roomName string, features []string) (*user, error) {
	return joinWith(ctx, api, secret, identity, roomName, features, nil)
}

// joinWith is joinRoom for a client that, with media, subscribes to the
// room's tracks and sets its own callbacks for them.
func joinWith(ctx context.Context, api, secret, identity, roomName string, features []string, media func(*lksdk.RoomCallback)) (*user, error) {
	token, lkURL, roomName, err := requestToken(ctx, api, secret, identity, roomName)
	if err != nil {
		return nil, err
	}
	u := &user{name: identity, convID: roomName, notify: make(chan struct{}, 1), gone: make(chan struct{})}
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
		p, ok := data.(*lksdk.UserDataPacket)
		if !ok || p.Topic != room.Topic {
			return
		}
		now := time.Now()
		env, err := wire.Unmarshal(p.Payload)
		if err != nil {
			return
		}
		u.mu.Lock()
		u.got = append(u.got, arrival{at: now, bytes: len(p.Payload), env: env})
		u.mu.Unlock()
		select {
		case u.notify <- struct{}{}:
		default:
		}
	}
	cb.OnReconnecting = func() {
		u.mu.Lock()
		if u.reconnecting.IsZero() {
			u.reconnecting = time.Now()
		}
		u.mu.Unlock()
	}
	cb.OnDisconnectedWithReason = func(reason lksdk.DisconnectionReason) {
		u.mu.Lock()
		u.lost, u.lostReason = time.Now(), reason
		u.mu.Unlock()
		u.goneOnce.Do(func() { close(u.gone) })
	}
	if media != nil {
		media(cb)
	}
	r, err := lksdk.ConnectToRoomWithToken(lkURL, token, cb, lksdk.WithAutoSubscribe(media != nil))
	if err != nil {
		return nil, err
	}
	u.room = r
	u.joined = time.Now()
	greeting, err := u.waitFor(ctx, 0, 20*time.Second, func(a arrival) bool {
		_, ok := a.env.Body.(*wire.Configuration)
		return ok
	})
	if err != nil {
		r.Disconnect()
		return nil, fmt.Errorf("greeting: %w", err)
	}
	u.greeted = greeting.at
	if err := u.send(&wire.Configuration{ConversationID: roomName, Features: features}); err != nil {
		r.Disconnect()
		return nil, err
	}
	return u, nil
}

func (u *user) send(body wire.Body) error {
	u.stanza++
	b, err := wire.Marshal(&wire.Envelope{StanzaID: u.stanza, ConversationID: u.convID, Body: body})
	if err != nil {
		return err
	}
	return u.room.LocalParticipant.PublishDataPacket(lksdk.UserData(b), lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishTopic(room.Topic))
}

// waitFor waits for an arrival at or after index from that matches.
func (u *user) waitFor(ctx context.Context, from int, timeout time.Duration, match func(arrival) bool) (arrival, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		u.mu.Lock()
		for _, a := range u.got[min(from, len(u.got)):] {
			if match(a) {
				u.mu.Unlock()
				return a, nil
			}
		}
		u.mu.Unlock()
		select {
		case <-u.notify:
		case <-deadline.C:
			return arrival{}, fmt.Errorf("nothing after %v", timeout)
		case <-ctx.Done():
			return arrival{}, ctx.Err()
		}
	}
}

// turn asks one question and collects the answer.
func (u *user) turn(ctx context.Context, k int, timeout time.Duration) turnResult {
	res, from := u.ask(k)
	if res.err != "" {
		return res
	}
	return u.answer(ctx, res, from, timeout)
}

// ask sends question k; from is where its answer's arrivals start.
func (u *user) ask(k int) (res turnResult, from int) {
	u.mu.Lock()
	from = len(u.got)
	u.mu.Unlock()
	q := fmt.Sprintf("Question %d in %s: how are you today?", k, u.convID)
	res = turnResult{question: q, steps: map[int32]time.Time{}}
	res.sent = time.Now()
	if err := u.send(&wire.UserMessage{ID: wire.NewID("msg"), ConversationID: u.convID, Content: q, Timestamp: res.sent.UnixMilli()}); err != nil {
		res.err = "send: " + err.Error()
	}
	return res, from
}

// answer waits for the answer to an asked question and collects it.
func (u *user) answer(ctx context.Context, res turnResult, from int, timeout time.Duration) turnResult {
	_, err := u.waitFor(ctx, from, timeout, func(a arrival) bool {
		switch b := a.env.Body.(type) {
		case *wire.AssistantSentence:
			return b.IsFinal
		case *wire.AssistantMessage:
			return true
		case *wire.ErrorMessage:
			return true
		}
		return false
	})
	if err != nil {
		res.err = "no answer: " + err.Error()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range u.got[from:] {
		res.packets++
		res.bytes += a.bytes
		switch b := a.env.Body.(type) {
		case *wire.ReasoningStep:
			if !b.Partial {
				res.steps[b.StepIndex] = a.at
			}
		case *wire.AssistantSentence:
			if strings.TrimSpace(b.Text) != "" {
				res.sentences = append(res.sentences, a)
			}
		case *wire.ErrorMessage:
			res.err = fmt.Sprintf("error %d: %s", b.Code, b.Message)
		}
	}
	u.streamedSteps(&res)
	return res
}

func sentenceText(a arrival) string {
	if s, ok := a.env.Body.(*wire.AssistantSentence); ok {
		return s.Text
	}
	return ""
}
