package testenv

import (
	"os/exec"
	"testing"
)

// LookPath finds a program a test needs on the PATH, or fails the test
// (skips it with ALICIA_SKIP_INTEGRATION=1) naming the program.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		unavailable(t, "%s is not installed: %v", name, err)
	}
	return p
}
