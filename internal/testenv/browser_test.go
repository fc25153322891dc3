package testenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
)

// OpenPage runs a page's script in Chromium with local storage set first,
// waits for it and brings back a value and the console.
func TestOpenPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>t</title><script>
			setTimeout(() => { window.done = localStorage.getItem('who') + ' ' + (6 * 7); console.log('set'); }, 50);
		</script>`)
	}))
	defer srv.Close()
	r := testenv.OpenPage(t, context.Background(), testenv.Page{URL: srv.URL, LocalStorage: map[string]string{"who": "page"},
		WaitFor: "window.done", Evaluate: "window.done"})
	var v string
	if err := json.Unmarshal(r.Value, &v); err != nil || v != "page 42" {
		t.Errorf("value %s (%v)", r.Value, err)
	}
	if !strings.Contains(strings.Join(r.Logs, "\n"), "[log] set") {
		t.Errorf("console: %v", r.Logs)
	}
}
