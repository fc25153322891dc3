package testenv

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/wire/agui"
)

// AGUIEvents reads an AG-UI SSE stream to its end and fails the test
// unless the events keep the client's rules.
func AGUIEvents(t testing.TB, body io.Reader) []agui.Event {
	t.Helper()
	var events []agui.Event
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev agui.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			events = append(events, ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := agui.CheckAll(events); err != nil {
		t.Fatalf("the stream breaks the client's rules: %v", err)
	}
	return events
}
