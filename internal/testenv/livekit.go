package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
)

var quietSDK sync.Once

// LiveKit is a livekit-server started for one test.
type LiveKit struct {
	// URL is the WebSocket URL clients connect to.
	URL       string
	APIKey    string
	APISecret string
	// NodeIP is the address media and data travel on.
	NodeIP string

	bin     string
	config  string
	httpURL string
	t       testing.TB

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *tailBuffer
}

// LiveKitBinary finds the livekit-server that scripts/install-livekit-server
// built: $ALICIA_LIVEKIT_SERVER, the build cache, or the PATH.
func LiveKitBinary() (string, error) {
	if p := os.Getenv("ALICIA_LIVEKIT_SERVER"); p != "" {
		return p, nil
	}
	cached := filepath.Join(cacheDir(), "livekit-server")
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	if p, err := exec.LookPath("livekit-server"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("livekit-server not found in $ALICIA_LIVEKIT_SERVER, %s or the PATH: run scripts/install-livekit-server", cached)
}

// StartLiveKit starts a livekit-server on free ports with a fresh key and
// secret, waits until it accepts connections and stops it when the test
// ends.
func StartLiveKit(t testing.TB) *LiveKit {
	t.Helper()
	// The SDK logs every ICE state change; test output wants only failures.
	quietSDK.Do(func() { lksdk.SetLogger(protoLogger.GetDiscardLogger()) })
	bin, err := LiveKitBinary()
	if err != nil {
		unavailable(t, "%v", err)
	}
	nodeIP, err := NodeIP()
	if err != nil {
		unavailable(t, "%v", err)
	}
	lk := &LiveKit{
		APIKey:    "AK" + randomHex(8),
		APISecret: randomHex(24), // non-dev servers want at least 32 characters
		NodeIP:    nodeIP,
		bin:       bin,
		t:         t,
	}
	// A free port can be taken between choosing it and the server binding
	// it, so a start that fails is retried on new ports.
	var lastErr error
	for range 3 {
		if lastErr = lk.configure(); lastErr != nil {
			break
		}
		if lastErr = lk.Start(); lastErr == nil {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("livekit-server output (last lines):\n%s", lk.logs.String())
				}
				lk.Stop()
			})
			return lk
		}
	}
	t.Fatalf("livekit-server did not start: %v", lastErr)
	return nil
}

func (lk *LiveKit) configure() error {
	httpPort, err := freePort("tcp")
	if err != nil {
		return err
	}
	tcpPort, err := freePort("tcp")
	if err != nil {
		return err
	}
	udpPort, err := freePort("udp")
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`port: %d
bind_addresses: ["127.0.0.1"]
keys:
  %s: %s
rtc:
  tcp_port: %d
  udp_port: %d
  node_ip: %s
  use_external_ip: false
  enable_loopback_candidate: true
room:
  auto_create: true
  empty_timeout: 30
  departure_timeout: 5
logging:
  level: warn
  pion_level: error
`, httpPort, lk.APIKey, lk.APISecret, tcpPort, udpPort, lk.NodeIP)
	dir := lk.t.TempDir()
	lk.config = filepath.Join(dir, "livekit.yaml")
	if err := os.WriteFile(lk.config, []byte(cfg), 0o600); err != nil {
		return err
	}
	lk.URL = fmt.Sprintf("ws://127.0.0.1:%d", httpPort)
	lk.httpURL = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	return nil
}

// Start starts the server (again, after Stop) on the same ports and waits
// until it answers.
func (lk *LiveKit) Start() error {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.cmd != nil {
		return errors.New("livekit-server is already running")
	}
	if lk.logs == nil {
		lk.logs = &tailBuffer{max: 64 << 10}
	}
	cmd := exec.Command(lk.bin, "--config", lk.config)
	cmd.Stdout, cmd.Stderr = lk.logs, lk.logs
	// Its own process group, so that a stop reaches nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	lk.cmd, lk.done = cmd, done

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, lk.httpURL, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			lk.cmd = nil
			return fmt.Errorf("livekit-server exited: %s", lastLines(lk.logs.String(), 5))
		case <-ctx.Done():
			lk.stopLocked(syscall.SIGKILL)
			return fmt.Errorf("livekit-server did not answer on %s within 20 s", lk.httpURL)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Stop stops the server: SIGTERM, then SIGKILL if it has not exited after
// two seconds (a server with open rooms waits for them on SIGTERM).
func (lk *LiveKit) Stop() {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.stopLocked(syscall.SIGTERM)
}

// Kill stops the server at once, as a crash would.
func (lk *LiveKit) Kill() {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.stopLocked(syscall.SIGKILL)
}

func (lk *LiveKit) stopLocked(sig syscall.Signal) {
	if lk.cmd == nil {
		return
	}
	_ = syscall.Kill(-lk.cmd.Process.Pid, sig)
	select {
	case <-lk.done:
	case <-time.After(2 * time.Second):
		_ = syscall.Kill(-lk.cmd.Process.Pid, syscall.SIGKILL)
		<-lk.done
	}
	lk.cmd = nil
}

// NodeIP is the address the test server offers for media and data. Go
// (pion) and Chromium clients ignore loopback ICE candidates, so it must be
// a non-loopback address of this machine: $ALICIA_TEST_NODE_IP, or the
// first IPv4 address of an interface that is up.
func NodeIP() (string, error) {
	if ip := os.Getenv("ALICIA_TEST_NODE_IP"); ip != "" {
		return ip, nil
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("no non-loopback IPv4 interface for livekit-server's media (scripts/test creates one when run as root; or set ALICIA_TEST_NODE_IP)")
}

func freePort(network string) (int, error) {
	switch network {
	case "udp":
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	default:
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
