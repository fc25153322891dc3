package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/testenv"
)

// startServeProcess builds alicia and runs `alicia serve` as a real
// process with nothing configured, so that it starts its own
// livekit-server; it returns the process and the livekit-server's pid.
func startServeProcess(t *testing.T) (*exec.Cmd, *testenv.LogBuffer, int) {
	t.Helper()
	if _, err := lkserver.Binary(); err != nil {
		testenv.StartLiveKit(t) // fails (or skips) with the reason
	}
	cmd, out := runServeProcess(t, testenv.AliciaBinary(t))
	lk := childNamed(t, cmd.Process.Pid, "livekit-server")
	t.Cleanup(func() { _ = syscall.Kill(lk, syscall.SIGKILL) })
	return cmd, out, lk
}

// runServeProcess runs `alicia serve` on a free HTTP port with only the
// ALICIA_ settings given in env, and waits for its banner.
func runServeProcess(t *testing.T, bin string, env ...string) (*exec.Cmd, *testenv.LogBuffer) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "-http-addr", "127.0.0.1:0")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ALICIA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out testenv.LogBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	waitFor(t, &out, "the serving banner", regexp.MustCompile(`Alicia serving`))
	return cmd, &out
}

// childNamed finds the child process of parent with that command name.
func childNamed(t *testing.T, parent int, name string) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range dirs {
		raw, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so cut at ')'.
		s := string(raw)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < 0 || s[open+1:close] != name[:min(len(name), 15)] {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if ppid, _ := strconv.Atoi(fields[1]); ppid == parent {
			pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
			return pid
		}
	}
	t.Fatalf("no %s child of %d", name, parent)
	return 0
}

// gone waits until pid no longer runs (a zombie waiting for its reaper
// counts as gone: it runs nothing and holds no port).
func gone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if s := string(raw); strings.Contains(s[strings.LastIndexByte(s, ')'):], ") Z") {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Killed with SIGKILL, Alicia can run no clean-up: its livekit-server must
// still not outlive it.
func TestLiveKitServerDiesWithAKilledAlicia(t *testing.T) {
	cmd, out, lk := startServeProcess(t)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
	if !gone(lk, 10*time.Second) {
		t.Fatalf("livekit-server %d still runs after alicia was killed\n%s", lk, out.String())
	}
}

// Ctrl-C is the normal way to stop, here after a one-question session:
// exit status 0, nothing left behind, and at the default info level the
// log holds no line of the LiveKit SDK's or pion's routine.
func TestCtrlCExitsCleanly(t *testing.T) {
	cmd, out, lk := startServeProcess(t)
	m := waitFor(t, out, "the chat command", regexp.MustCompile(`alicia chat -api (\S+) -secret (\S+)`))
	stdinR, stdinW := io.Pipe()
	var chatOut testenv.LogBuffer
	chatted := make(chan error, 1)
	go func() {
		chatted <- runChat(context.Background(), []string{"-api", m[1], "-secret", m[2]}, stdinR, &chatOut, io.Discard)
	}()
	waitFor(t, &chatOut, "the prompt", regexp.MustCompile(`Joined conv_`))
	_, _ = io.WriteString(stdinW, "hello there\n")
	waitFor(t, &chatOut, "the answer", regexp.MustCompile(`(?s)You said: "hello there".*\n> `))
	stdinW.Close()
	if err := <-chatted; err != nil {
		t.Fatalf("chat: %v", err)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if errors.As(err, &exit) || err != nil {
			t.Fatalf("alicia exited with %v after Ctrl-C\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("alicia did not stop within 30 s of Ctrl-C\n%s", out.String())
	}
	if !gone(lk, 10*time.Second) {
		t.Fatalf("livekit-server %d still runs after alicia stopped\n%s", lk, out.String())
	}
	log := out.String()
	if strings.Contains(log, "join plan") || strings.Contains(log, `"level"=`) || strings.Contains(log, "level=DEBUG") {
		t.Fatalf("SDK debug lines in the log at info level:\n%s", log)
	}
	t.Logf("%d log lines for a one-question session and its stop", strings.Count(log, "\n"))
}

// The newcomer's start command, stopped with Ctrl-C as a terminal sends
// it (SIGINT to the whole foreground process group), exits with status 0.
func TestStartScriptCtrlCExitsZero(t *testing.T) {
	if _, err := lkserver.Binary(); err != nil {
		testenv.StartLiveKit(t) // fails (or skips) with the reason
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ALICIA_") || strings.HasPrefix(kv, "ALICIA_CACHE_DIR=") || strings.HasPrefix(kv, "ALICIA_LIVEKIT_SERVER=") {
			env = append(env, kv)
		}
	}
	// The script's own build, done first and untimed: the banner's wait
	// below is for starting, and a build cache that holds only another
	// build's flags (the race detector's) can take longer than that to
	// compile everything. The script then finds its binary up to date.
	build := exec.Command("go", "build", "-o", "alicia", "./cmd/alicia")
	build.Dir, build.Env = testenv.RepoRoot(), env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build, as scripts/start runs it: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "start"), "-http-addr", "127.0.0.1:0")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's foreground group
	var out testenv.LogBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	waitFor(t, &out, "the serving banner", regexp.MustCompile(`Alicia serving`))
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("scripts/start exited with %v after Ctrl-C\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("scripts/start did not stop within 30 s of Ctrl-C\n%s", out.String())
	}
}
