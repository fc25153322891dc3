package testenv

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"sync"
	"testing"
	"time"
)

// EventuallyWithin is how long Eventually waits: long enough for a loaded
// machine, since a passing test never waits it out.
const EventuallyWithin = 30 * time.Second

// Eventually waits until cond holds, for a change the test cannot be
// told of (another process, a server, a store's write queue), and fails
// the test naming what never came.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Within(EventuallyWithin, cond) {
		t.Fatalf("timed out after %v waiting for %s", EventuallyWithin, what)
	}
}

// Within is Eventually for a test that has something to do when cond
// does not hold within d: it says whether it did.
func Within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// LogBuffer is a log destination the test reads while the code under
// test writes it from its own goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// grew is closed by the next write, for a reader waiting on one.
	grew chan struct{}
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.grew != nil {
		close(l.grew)
		l.grew = nil
	}
	return l.b.Write(p)
}

// WaitFor waits, at most d, until what was written matches re, and
// returns the match; nil if it did not. The whole text is matched again
// at each write, since a pattern may span lines.
func (l *LogBuffer) WaitFor(re *regexp.Regexp, d time.Duration) []string {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		text := l.b.String()
		if l.grew == nil {
			l.grew = make(chan struct{})
		}
		grew := l.grew
		l.mu.Unlock()
		if m := re.FindStringSubmatch(text); m != nil {
			return m
		}
		select {
		case <-grew:
		case <-timeout.C:
			return re.FindStringSubmatch(l.String())
		}
	}
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Log is a debug log for the code under test, shown when the test fails:
// a turn that never came says there where it stopped. Made before the code
// it logs for, its cleanup runs after that code's own has stopped it.
func Log(t testing.TB) *slog.Logger {
	var logs LogBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of the code under test:\n%s", logs.String())
		}
	})
	return slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// CleanupWithin registers close as a cleanup whose context ends after d:
// a close that cannot finish (a store flushing to a database that is
// down) fails the test instead of hanging its binary until the package's
// timeout, which names no test.
func CleanupWithin(t testing.TB, d time.Duration, close func(context.Context)) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		close(ctx)
		if ctx.Err() != nil {
			t.Errorf("a cleanup did not finish within %v", d)
		}
	})
}
