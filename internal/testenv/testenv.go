// Package testenv gives tests the real parts they run against: a
// livekit-server on free ports, a Postgres database of their own, and the
// Node.js clients under internal/testenv/node.
//
// A part that is missing fails the test with the reason and how to install
// it. ALICIA_SKIP_INTEGRATION=1 turns those failures into skips, for a
// quick run of the pure unit tests; a silent skip would hide breakage.
// Every test asks for its parts through this package (StartLiveKit,
// Database, Chromium, Program, NodePackages, SpeechEngines), so that this
// one rule holds for all of them.
package testenv

import (
	"os"
	"os/exec"
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

// Program is the path of a program the test runs, found on PATH; install
// says where it comes from.
func Program(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "%s is not installed (%s; .ci/run installs it)", name, install)
	}
	return p
}

// SpeechEngines checks for the programs the speech stand-in and the
// tests' rendered speech run: espeak-ng speaks, sox converts, pocketsphinx
// recognises.
func SpeechEngines(t testing.TB) {
	t.Helper()
	Program(t, "espeak-ng", "Debian package espeak-ng")
	Program(t, "sox", "Debian package sox")
	Program(t, "pocketsphinx_continuous", "Debian packages pocketsphinx, pocketsphinx-en-us")
}

// RealTime marks a test that listens to real-time audio (a voice over
// LiveKit, a browser's microphone and speaker), which a starved CPU
// garbles. scripts/test runs every other test two packages at a time with
// ALICIA_TEST_REALTIME=skip, then these when nothing compiles, two
// packages at a time: it finds them by this call, which must stay in the
// test's own body.
func RealTime(t testing.TB) {
	t.Helper()
	if os.Getenv("ALICIA_TEST_REALTIME") == "skip" {
		t.Skip("listens to real-time audio: scripts/test runs it in the real-time phase")
	}
}

// RealTimeAlone marks a real-time test whose client also plays the bot's
// voice back into its own microphone, as a speakerphone does: that echo
// follows the client's playout, which a neighbour's load moves, and the
// echo canceller must follow it. scripts/test runs these last, one at a
// time, with nothing beside them.
func RealTimeAlone(t testing.TB) {
	t.Helper()
	RealTime(t)
}
