package web_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/web"
)

// The committed bundle is what the sources build to: a change to src/ or
// to a pinned package without npm run build fails here.
func TestCommittedBundleMatchesSources(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "web")
	node := testenv.NodePackages(t, dir)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "build.mjs", out)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, msg)
	}
	built, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadDir(filepath.Join(dir, "dist"))
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != len(committed) {
		t.Errorf("the build made %d files, dist/ holds %d", len(built), len(committed))
	}
	for _, f := range built {
		want, _ := os.ReadFile(filepath.Join(out, f.Name()))
		got, err := os.ReadFile(filepath.Join(dir, "dist", f.Name()))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("dist/%s is not what src/ builds to: run npm run build in web/ and commit dist/", f.Name())
		}
	}
}

func TestHandlerServesThePage(t *testing.T) {
	srv := httptest.NewServer(web.Handler())
	defer srv.Close()
	get := func(path string) (*http.Response, string) {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, body := get("/")
	if res.StatusCode != 200 || !strings.Contains(body, `src="app.js"`) || res.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("GET /: %d %q %q", res.StatusCode, res.Header.Get("Cache-Control"), body)
	}
	res, body = get("/app.js")
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Type"), "javascript") || len(body) < 1000 {
		t.Errorf("GET /app.js: %d %q, %d bytes", res.StatusCode, res.Header.Get("Content-Type"), len(body))
	}
	if res, _ := get("/nothing-here"); res.StatusCode != 404 {
		t.Errorf("GET /nothing-here: %d", res.StatusCode)
	}
}
