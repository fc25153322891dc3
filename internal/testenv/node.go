package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// NodeDir holds the package.json of the JavaScript test clients.
func NodeDir() string { return filepath.Join(RepoRoot(), "internal", "testenv", "node") }

// Node runs a script from NodeDir with the given stdin and returns its
// stdout. A non-zero exit fails the test with the script's stderr.
func Node(t testing.TB, stdin []byte, script string, args ...string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Unavailable(t, "node is not installed (scripts/test installs it)")
	}
	if _, err := os.Stat(filepath.Join(NodeDir(), "node_modules")); err != nil {
		Unavailable(t, "the Node test clients are not installed: run npm ci in %s", NodeDir())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(NodeDir(), script)}, args...)...)
	cmd.Dir = NodeDir()
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.Bytes())
	}
	return stdout.Bytes()
}
