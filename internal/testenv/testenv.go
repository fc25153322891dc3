// Package testenv gives tests the real parts they run against: a
// livekit-server on free ports, a Postgres database of their own, and the
// Node.js clients under internal/testenv/node.
//
// A part that is missing fails the test with the reason and how to install
// it. ALICIA_SKIP_INTEGRATION=1 turns those failures into skips, for a
// quick run of the pure unit tests; a silent skip would hide breakage.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Unavailable fails (or, with ALICIA_SKIP_INTEGRATION=1, skips) a test
// that needs a part this machine does not have.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("ALICIA_SKIP_INTEGRATION") == "1" {
		t.Skipf("ALICIA_SKIP_INTEGRATION=1: "+format, args...)
	}
	t.Fatalf(format+" (set ALICIA_SKIP_INTEGRATION=1 to skip tests that need it)", args...)
}

// RepoRoot is the root of the source tree.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
