package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	builtDir    string
	buildAlicia = sync.OnceValues(func() (string, error) {
		if built := os.Getenv("ALICIA_TEST_BINARY"); built != "" {
			return built, nil
		}
		dir, err := os.MkdirTemp("", "alicia-test-bin-")
		if err != nil {
			return "", err
		}
		builtDir = dir
		bin := filepath.Join(dir, "alicia")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/alicia-voice/alicia/cmd/alicia").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("build alicia: %v\n%s", err, out)
		}
		return bin, nil
	})
)

// AliciaBinary is the alicia command for tests that run it as a process,
// built once per test binary: a link takes 15 s on a busy 2-core machine.
// The package's TestMain calls RunMain, which removes it at the end.
// scripts/test builds it once for all of them (ALICIA_TEST_BINARY): two
// test binaries that build it at the same moment on a fresh machine each
// compile its dependencies, a minute and a half of both cores.
func AliciaBinary(t testing.TB) string {
	t.Helper()
	bin, err := buildAlicia()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// RunMain runs the tests and removes what AliciaBinary built.
func RunMain(m *testing.M) int {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	return code
}
