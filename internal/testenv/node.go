package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// NodeDir holds the package.json of the JavaScript test clients.
func NodeDir() string { return filepath.Join(RepoRoot(), "internal", "testenv", "node") }

// NodePackages checks that node is installed and that every dependency of
// dir's package.json is in its node_modules (scripts/test installs them),
// and returns node's path.
func NodePackages(t testing.TB, dir string) string {
	t.Helper()
	node := Program(t, "node", "Debian package nodejs")
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies, DevDependencies map[string]string
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatalf("%s/package.json: %v", dir, err)
	}
	names := slices.Sorted(maps.Keys(pkg.Dependencies))
	names = append(names, slices.Sorted(maps.Keys(pkg.DevDependencies))...)
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", name, "package.json")); err != nil {
			Unavailable(t, "the npm package %s is not installed in %s (scripts/test installs them)", name, dir)
		}
	}
	return node
}

// Node runs a script from NodeDir with the given stdin and returns its
// stdout. A non-zero exit fails the test with the script's stderr.
func Node(t testing.TB, stdin []byte, script string, args ...string) []byte {
	t.Helper()
	node := NodePackages(t, NodeDir())
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
