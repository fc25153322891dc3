package room

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// logLines keeps what an agent logs, for tests that read its warnings.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logLines) containing(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// A process configured for N conversations gets N rooms: LiveKit stops
// dispatching to a worker at its target load (0.7), so a load of
// sessions/N would leave the last 30 % of the capacity unused. Once full,
// the log says so.
func TestConfiguredMaximumIsReachable(t *testing.T) {
	const max = 4
	lk := testenv.StartLiveKit(t)
	var logged logLines
	e := startAgentWith(t, lk, storage.NewMemory(storage.ReasoningPlain), func(c *Config) { c.MaxSessions = max },
		slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo})))
	for i := range max {
		room := fmt.Sprintf("conv_load_%d", i)
		c := joinAs(t, e, room, "user")
		c.wait(fmt.Sprintf("the bot in room %d of %d", i+1, max), func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 })
	}
	if n := len(e.agent.Sessions()); n != max {
		t.Fatalf("%d sessions, want %d", n, max)
	}
	if logged.containing("worker full") == 0 {
		t.Fatalf("the agent took its maximum and did not say it is full:\n%s", strings.Join(logged.lines, ""))
	}
	load, jobs, full := e.agent.load()
	t.Logf("reported at the maximum: load %.2f, %d jobs, full %v", load, jobs, full)
}
