package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/wire"
)

// A livekit-server node stops under a conversation. This measures and
// logs what LiveKit allows: the user's SDK tries to resume against the
// dead node and gives up; the room dies with the node (LiveKit does not
// move rooms between nodes); the bot there loses the room. The client
// comes back by asking a live worker for a token to the same room, which
// recreates it on a live node, and resumes by stanza id: the conversation
// continues from storage.
func TestStoppedLiveKitNode(t *testing.T) {
	bin := processTest(t, "builds alicia and runs four servers")
	nodes := twoNodes(t, "nodestop")
	env, _ := botBackends(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bots := botOnEach(ctx, t, bin, nodes, env)
	features := []string{wire.FeatureStreaming, wire.FeatureReasoningSteps}
	// The user's room lives on node 1 (the token names node 1's URL).
	u, err := join(ctx, bots[0].api, bots[0].secret, "alice", features)
	if err != nil {
		t.Fatalf("%v\nworker 1:\n%s\nworker 2:\n%s", err, bots[0].logTail(10), bots[1].logTail(10))
	}
	t.Cleanup(u.room.Disconnect)
	if r := u.turn(ctx, 1, time.Minute); r.err != "" {
		t.Fatal(r.err)
	}
	// Bob's room is on node 1 too; his client does not wait for its SDK to
	// give up: as soon as it starts resuming, it goes to a live worker.
	bob, err := join(ctx, bots[0].api, bots[0].secret, "bob", features)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.room.Disconnect)
	if r := bob.turn(ctx, 1, time.Minute); r.err != "" {
		t.Fatal(r.err)
	}
	served := 1
	if log, _ := os.ReadFile(bots[1].logFile); strings.Contains(string(log), "room="+u.convID+" ") {
		served = 2
	}
	t.Logf("room on node 1, served by the worker connected to node %d", served)

	stopped := time.Now()
	bobBack := make(chan error, 1)
	go func() {
		for bob.room.ConnectionState() == lksdk.ConnectionStateConnected && ctx.Err() == nil {
			sleepCtx(ctx, 50*time.Millisecond)
		}
		noticed := time.Since(stopped)
		bob.room.Disconnect()
		msg, err := comeBack(ctx, t, bob, bots[1], stopped, features)
		worker2 := linesWith(bots[1].logTail(400), bob.convID)
		if err != nil {
			err = fmt.Errorf("bob: %w\nworker 2 on bob's room:\n%s", err, worker2)
		} else {
			t.Logf("bob (gives up at once): noticed after %v; %s\nworker 2 on bob's room:\n%s", noticed.Round(time.Millisecond), msg, worker2)
		}
		bobBack <- err
	}()
	nodes[0].Stop()
	t.Logf("node 1 stopped in %v", time.Since(stopped).Round(time.Millisecond))
	// The user's SDK: resuming, then giving up.
	select {
	case <-u.gone:
	case <-time.After(90 * time.Second):
		t.Fatal("the user's SDK never gave up on the dead node")
	}
	u.mu.Lock()
	reconnecting, lost, reason := u.reconnecting, u.lost, u.lostReason
	lastSeen := int32(0)
	for _, a := range u.got {
		lastSeen = max(lastSeen, -a.env.StanzaID)
	}
	u.mu.Unlock()
	if !reconnecting.IsZero() {
		t.Logf("user: resuming after %v", reconnecting.Sub(stopped).Round(time.Millisecond))
	}
	t.Logf("user: disconnected after %v (%v)", lost.Sub(stopped).Round(time.Millisecond), reason)

	msg, err := comeBack(ctx, t, u, bots[1], stopped, features)
	if err != nil {
		t.Fatalf("alice: %v\nworker 2:\n%s", err, bots[1].logTail(20))
	}
	t.Logf("alice (waits for her SDK): %s", msg)
	if err := <-bobBack; err != nil {
		t.Error(err)
	}
	for i, b := range bots {
		for _, line := range strings.Split(b.logTail(400), "\n") {
			if strings.Contains(line, u.convID) || strings.Contains(line, "disconnected") || strings.Contains(line, "lost") {
				t.Logf("worker %d: %s", i+1, line)
			}
		}
	}
}

// comeBack is what a client does when its room is gone: it asks a live
// worker for a token to the same room until it gets in and a bot greets
// it, resumes by stanza id, and asks its next question.
func comeBack(ctx context.Context, t *testing.T, u *user, live *bot, stopped time.Time, features []string) (string, error) {
	u.mu.Lock()
	lastSeen := int32(0)
	for _, a := range u.got {
		lastSeen = max(lastSeen, -a.env.StanzaID)
	}
	u.mu.Unlock()
	var u2 *user
	var err error
	attempts := 0
	for u2 == nil {
		attempts++
		if u2, err = joinRoom(ctx, live.api, live.secret, u.name, u.convID, features); err != nil {
			t.Logf("%s: attempt %d at %v: %v", u.name, attempts, time.Since(stopped).Round(time.Millisecond), err)
			// A client's retry pace.
			if !sleepCtx(ctx, time.Second) {
				return "", fmt.Errorf("never back after %d attempts: %w", attempts, err)
			}
		}
	}
	t.Cleanup(u2.room.Disconnect)
	back := time.Since(stopped)
	u2.stanza = u.stanza
	if err := u2.send(&wire.Configuration{ConversationID: u.convID, LastSequenceSeen: lastSeen, Features: features}); err != nil {
		return "", err
	}
	r := u2.turn(ctx, 2, time.Minute)
	if r.err != "" {
		return "", fmt.Errorf("after the node stopped: %s", r.err)
	}
	u2.mu.Lock()
	defer u2.mu.Unlock()
	for _, a := range u2.got {
		if e, ok := a.env.Body.(*wire.ErrorMessage); ok {
			return "", fmt.Errorf("error %d after coming back: %s", e.Code, e.Message)
		}
	}
	return fmt.Sprintf("back in the room via node 2 %v after the stop (%d attempts); next answer %v after the stop",
		back.Round(time.Millisecond), attempts, time.Since(stopped).Round(time.Millisecond)), nil
}

// linesWith are the lines of log that mention s.
func linesWith(log, s string) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
