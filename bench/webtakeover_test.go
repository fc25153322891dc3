package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
)

// The web page through a crash of the process serving its conversation:
// killed while the answer streams, another process takes the
// conversation over through its lease, and the page answers the new
// bot's greeting with a resume (it had configured itself with the bot
// before), shows the answer cut short where it stopped, and its next
// question is answered. Before, the page took the new bot's greeting for
// a settings update: the answer it was reading stayed unfinished on
// screen, and the notice that it was interrupted, sent to clients that
// resume, never reached it.
func TestWebPageThroughATakeover(t *testing.T) {
	bin := processTest(t, "builds alicia, runs two servers and Chromium")
	testenv.Chromium(t)
	node, err := lkserver.StartNode(t.TempDir(), lkserver.NodeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	var story []string
	for i := 1; i <= 30; i++ {
		story = append(story, fmt.Sprintf("This is sentence %d of a long story about a lighthouse keeper.", i))
	}
	const answer = "A lighthouse warns ships away from the rocks."
	// 40 ms a token: the story streams for about 15 s, long enough to be
	// killed in the middle of on a busy machine.
	env, dbURL := botBackendsWith(t, []standin.Scenario{
		{Name: "story", Match: "(?i)story", Rounds: []standin.Round{{Answer: strings.Join(story, " ")}}},
		{Name: "lighthouse", Match: "(?i)lighthouse", Rounds: []standin.Round{{Answer: answer}}},
	}, standin.Pacing{TTFTMs: 50, TokenMs: 40})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := serveBot(ctx, t, bin, node, env)

	// Once the page shows the story streaming (its script says so), a
	// second process starts and the first is killed: the second is the
	// only one left to take the room over.
	shown := make(chan struct{}, 1)
	signal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case shown <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(signal.Close)
	killed, finished := make(chan error, 1), make(chan struct{})
	// However the test ends, the goroutine is stopped and waited for.
	defer func() {
		cancel()
		<-finished
	}()
	var b *bot
	go func() {
		defer close(finished)
		killed <- func() error {
			select {
			case <-shown:
			case <-ctx.Done():
				return errors.New("the page never showed the story streaming")
			}
			var err error
			if b, err = startBot(ctx, bin, t.TempDir(), node, env); err != nil {
				return err
			}
			t.Cleanup(b.stop)
			if err := a.cmd.Process.Kill(); err != nil {
				return err
			}
			<-a.done
			return nil
		}()
	}()

	type answerShown struct {
		ID       string `json:"id"`
		Text     string `json:"text"`
		Done     bool   `json:"done"`
		CutShort bool   `json:"cutShort"`
	}
	var r struct{ Killed, Next answerShown }
	testenv.Browser(t, ctx, "web-client.mjs", map[string]any{"url": a.api, "key": a.secret, "name": "Ana", "scenario": "takeover",
		"long": "Tell me a story, please.", "question": "What is a lighthouse for?", "signal": signal.URL}, &r)
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	full := strings.Join(story, " ")
	if !r.Killed.Done || !r.Killed.CutShort || r.Killed.Text == "" || !strings.HasPrefix(full, strings.Join(strings.Fields(r.Killed.Text), " ")) || len(r.Killed.Text) >= len(full) {
		t.Errorf("the killed answer shows %+v", r.Killed)
	}
	if got := strings.Join(strings.Fields(r.Next.Text), " "); !r.Next.Done || got != answer {
		t.Errorf("the next answer shows %+v", r.Next)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var status string
	if err := conn.QueryRow(ctx, `SELECT status FROM alicia_messages WHERE id = $1`, r.Killed.ID).Scan(&status); err != nil || status != "interrupted" {
		t.Errorf("the killed answer %s is stored %q (%v)", r.Killed.ID, status, err)
	}
	if t.Failed() {
		t.Logf("the surviving process's log:\n%s", b.logTail(30))
	}
}
