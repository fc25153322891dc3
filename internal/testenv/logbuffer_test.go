package testenv

import (
	"fmt"
	"regexp"
	"testing"
	"time"
)

// A wait for a line returns it once it is written, whether the wait began
// before it or after, and nothing once its time is up.
func TestLogBufferWaitFor(t *testing.T) {
	var b LogBuffer
	re := regexp.MustCompile(`serving on (\S+)`)
	found := make(chan []string, 1)
	go func() { found <- b.WaitFor(re, time.Minute) }()
	fmt.Fprintln(&b, "starting")
	fmt.Fprintln(&b, "serving on 127.0.0.1:8080")
	if m := <-found; len(m) != 2 || m[1] != "127.0.0.1:8080" {
		t.Fatalf("the wait returned %q", m)
	}
	if m := b.WaitFor(re, time.Minute); len(m) != 2 {
		t.Fatalf("a wait begun after the line returned %q", m)
	}
	if m := b.WaitFor(regexp.MustCompile(`stopped`), 10*time.Millisecond); m != nil {
		t.Fatalf("a line never written was found: %q", m)
	}
}
