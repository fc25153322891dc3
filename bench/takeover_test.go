package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/wire"
)

// A worker killed with SIGKILL in the middle of answering: its lease in
// Postgres lapses, exactly one of the two survivors claims it and has
// each room that still has users dispatched again, the new bot replaces
// the stale participant and greets, each client resumes by stanza id,
// learns that the answer it was reading was interrupted, and its next
// question is answered. LiveKit's webhook, which would say the same
// 20 s or more later, stays configured, as in a deployment: the survivors'
// logs show it was the lease. The times from the kill to the greeting
// and to that answer are logged; what was stored before the kill is
// there once, and the killed answer is stored interrupted.
func TestKilledWorkerIsTakenOver(t *testing.T) {
	bin := processTest(t, "builds alicia and runs three servers")
	portB, err := lkserver.FreePort("tcp")
	if err != nil {
		t.Fatal(err)
	}
	// The webhook goes to the survivor; in a deployment it goes to a
	// load balancer in front of every worker.
	node, err := lkserver.StartNode(t.TempDir(), lkserver.NodeConfig{
		WebhookURLs: []string{fmt.Sprintf("http://127.0.0.1:%d/v1/livekit/webhook", portB)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	env, dbURL := botBackends(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Worker A alone takes every room; B starts afterwards.
	a := serveBot(ctx, t, bin, node, env)
	const n = 4
	features := []string{wire.FeatureStreaming, wire.FeatureReasoningSteps}
	users := make([]*user, n)
	for i := range users {
		u, err := join(ctx, a.api, a.secret, fmt.Sprintf("user%d", i), features)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(u.room.Disconnect)
		if r := u.turn(ctx, 1, time.Minute); r.err != "" {
			t.Fatalf("%s, first turn: %s", u.name, r.err)
		}
		users[i] = u
	}
	b, err := startBotOn(ctx, portB, bin, t.TempDir(), node, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.stop)
	c := serveBot(ctx, t, bin, node, env)

	// Mid-answer: every user has a reasoning step of its second question.
	froms := make([]int, n)
	for i, u := range users {
		var res turnResult
		if res, froms[i] = u.ask(2); res.err != "" {
			t.Fatal(res.err)
		}
	}
	for i, u := range users {
		if _, err := u.waitFor(ctx, froms[i], 30*time.Second, func(a arrival) bool {
			_, ok := a.env.Body.(*wire.ReasoningStep)
			return ok
		}); err != nil {
			t.Fatalf("%s: no reasoning step: %v", u.name, err)
		}
	}
	killed := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done

	// The answer is timed to its last sentence and to its first, and the
	// question from when the user could ask it (told of the interruption).
	took, greeted := make([]time.Duration, n), make([]time.Duration, n)
	asked, first := make([]time.Duration, n), make([]time.Duration, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u.mu.Lock()
			from := len(u.got)
			lastSeen := int32(0)
			for _, a := range u.got {
				lastSeen = max(lastSeen, -a.env.StanzaID)
			}
			u.mu.Unlock()
			// The new bot's greeting, with no action of the user's.
			g, err := u.waitFor(ctx, from, 90*time.Second, func(a arrival) bool {
				_, ok := a.env.Body.(*wire.Configuration)
				return ok
			})
			if err != nil {
				errs[i] = fmt.Errorf("%s: no new bot: %w", u.name, err)
				return
			}
			greeted[i] = g.at.Sub(killed)
			if err := u.send(&wire.Configuration{ConversationID: u.convID, LastSequenceSeen: lastSeen, Features: features}); err != nil {
				errs[i] = err
				return
			}
			if _, err := u.waitFor(ctx, from, 30*time.Second, func(a arrival) bool {
				ack, ok := a.env.Body.(*wire.Acknowledgement)
				return ok && ack.Notes == pipeline.NoteInterrupted && ack.AcknowledgedMessageID != ""
			}); err != nil {
				errs[i] = fmt.Errorf("%s: not told the killed answer was interrupted: %w", u.name, err)
				return
			}
			r := u.turn(ctx, 3, time.Minute)
			if r.err != "" {
				errs[i] = fmt.Errorf("%s, third turn: %s", u.name, r.err)
				return
			}
			took[i] = time.Since(killed)
			asked[i] = r.sent.Sub(killed)
			if len(r.sentences) > 0 {
				first[i] = r.sentences[0].at.Sub(killed)
			}
			// Resuming worked without complaint, and no stanza id was
			// given to two messages: the killed bot's numbers were
			// reserved in storage before it used them.
			u.mu.Lock()
			defer u.mu.Unlock()
			seen := map[int32]string{}
			for j, a := range u.got {
				if e, ok := a.env.Body.(*wire.ErrorMessage); ok && j >= from {
					errs[i] = fmt.Errorf("%s: error %d after the takeover: %s", u.name, e.Code, e.Message)
				}
				kind := fmt.Sprintf("%T", a.env.Body)
				if prev, ok := seen[a.env.StanzaID]; ok && prev != kind {
					errs[i] = fmt.Errorf("%s: stanza %d was a %s and then a %s", u.name, a.env.StanzaID, prev, kind)
				}
				seen[a.env.StanzaID] = kind
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.Logf("worker B's log:\n%s\nworker C's log:\n%s", b.logTail(30), c.logTail(30))
		return
	}
	// Each room was taken over once, through the lease, by one survivor.
	taken := map[string]int{}
	for _, s := range []*bot{b, c} {
		log, err := os.ReadFile(s.logFile)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "taking over a room whose process's lease lapsed") {
				for _, u := range users {
					if strings.Contains(line, u.convID) {
						taken[u.convID]++
					}
				}
			}
		}
	}
	for _, u := range users {
		if taken[u.convID] != 1 {
			t.Errorf("%s: taken over through a lease %d times, not once", u.convID, taken[u.convID])
		}
	}
	span := func(d []time.Duration) string {
		slices.Sort(d)
		return fmt.Sprintf("%v to %v", d[0].Round(time.Millisecond), d[n-1].Round(time.Millisecond))
	}
	t.Logf("kill → new bot's greeting: %s; → next question asked: %s; → its answer's first sentence: %s; → answer to the next question: %s (%d rooms)",
		span(greeted), span(asked), span(first), span(took), n)

	// What was stored is there once: each conversation holds its three
	// questions once each and an answer to the first and third.
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, u := range users {
		// The bot writes in batches: the third answer's last state lands
		// a moment after the client read it.
		var questions map[string]int
		var answers []string
		deadline := time.Now().Add(10 * time.Second)
		for {
			questions, answers = stored(ctx, t, conn, u.convID)
			if slices.Equal(answers, []string{"complete", "interrupted", "complete"}) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		for k := 1; k <= 3; k++ {
			q := fmt.Sprintf("Question %d in %s: how are you today?", k, u.convID)
			if k != 2 && questions[q] != 1 {
				t.Errorf("%s: question %d stored %d times", u.convID, k, questions[q])
			}
			if questions[q] > 1 {
				t.Errorf("%s: question %d stored %d times", u.convID, k, questions[q])
			}
		}
		if !slices.Equal(answers, []string{"complete", "interrupted", "complete"}) {
			t.Errorf("%s: answers stored: %v, not the first and third complete and the killed one interrupted", u.convID, answers)
		}
		t.Logf("%s: questions %d, answers %v", u.convID, len(questions), answers)
	}
}

// stored is what Postgres holds of a conversation: how often each
// question is there, and the answers' statuses in order.
func stored(ctx context.Context, t *testing.T, conn *pgx.Conn, conv string) (map[string]int, []string) {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT role, content, status FROM alicia_messages WHERE conversation_id = $1 ORDER BY created_at`, conv)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	questions := map[string]int{}
	var answers []string
	for rows.Next() {
		var role, content, status string
		if err := rows.Scan(&role, &content, &status); err != nil {
			t.Fatal(err)
		}
		if role == "user" {
			questions[content]++
		} else {
			answers = append(answers, status)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return questions, answers
}
