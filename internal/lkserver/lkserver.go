// Package lkserver runs a livekit-server process on free ports: for tests,
// and for `alicia serve` on a machine with no LiveKit server of its own.
package lkserver

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
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a livekit-server process.
type Server struct {
	// URL is the WebSocket URL clients connect to.
	URL       string
	APIKey    string
	APISecret string
	// NodeIP is the address media and data travel on.
	NodeIP string
	// DebugURL serves livekit-server's pprof handlers (/debug/pprof/).
	DebugURL string

	bin     string
	config  string
	httpURL string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	Logs *TailBuffer
}

// GOGC is livekit-server's garbage collection target, here and in
// docker-compose.yml. With Go's default (100), a node holding 1000
// participants marked a 950 MB heap for 1.3 s, mostly in mutator assists
// that held every room's packets as long, on a machine it shares with
// Alicia (README, Benchmark). A GOGC in the environment wins.
const GOGC = "200"

// CacheDir is where scripts/install-livekit-server keeps its build.
func CacheDir() string {
	if d := os.Getenv("ALICIA_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "alicia")
	}
	return filepath.Join(os.TempDir(), "alicia-cache")
}

// Binary finds the livekit-server that scripts/install-livekit-server
// built: $ALICIA_LIVEKIT_SERVER, the build cache, or the PATH.
func Binary() (string, error) {
	if p := os.Getenv("ALICIA_LIVEKIT_SERVER"); p != "" {
		return p, nil
	}
	cached := filepath.Join(CacheDir(), "livekit-server")
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	if p, err := exec.LookPath("livekit-server"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("livekit-server not found in $ALICIA_LIVEKIT_SERVER, %s or the PATH: run scripts/install-livekit-server", cached)
}

// New prepares a server on free ports with a fresh key and secret; its
// configuration is written into dir.
func New(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	nodeIP, err := NodeIP()
	if err != nil {
		return nil, err
	}
	s := &Server{APIKey: "AK" + randomHex(8), APISecret: randomHex(24), NodeIP: nodeIP, bin: bin, Logs: &TailBuffer{Max: 64 << 10}}
	return s, s.configure(dir)
}

func (s *Server) configure(dir string) error {
	httpPort, err := FreePort("tcp")
	if err != nil {
		return err
	}
	tcpPort, err := FreePort("tcp")
	if err != nil {
		return err
	}
	udpPort, err := FreePort("udp")
	if err != nil {
		return err
	}
	debugPort, err := FreePort("tcp")
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
debug_handler:
  port: %d
`, httpPort, s.APIKey, s.APISecret, tcpPort, udpPort, s.NodeIP, debugPort)
	s.config = filepath.Join(dir, "livekit.yaml")
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		return err
	}
	s.URL = fmt.Sprintf("ws://127.0.0.1:%d", httpPort)
	s.httpURL = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	s.DebugURL = fmt.Sprintf("http://127.0.0.1:%d", debugPort)
	return nil
}

// StartFresh starts a new server, retrying on new ports when one was
// taken between choosing it and binding it.
func StartFresh(dir string) (*Server, error) {
	var lastErr error
	for range 3 {
		s, err := New(dir)
		if err != nil {
			return nil, err
		}
		if lastErr = s.Start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("livekit-server did not start: %w", lastErr)
}

// Start starts the server (again, after Stop) on the same ports and waits
// until it answers.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("livekit-server is already running")
	}
	if s.Logs == nil {
		s.Logs = &TailBuffer{Max: 64 << 10}
	}
	cmd := exec.Command(s.bin, "--config", s.config)
	cmd.Stdout, cmd.Stderr = s.Logs, s.Logs
	cmd.Env = os.Environ()
	if os.Getenv("GOGC") == "" {
		cmd.Env = append(cmd.Env, "GOGC="+GOGC)
	}
	// Its own process group, so that a stop reaches nothing else; and it
	// dies with this process even when this one is killed (Linux).
	cmd.SysProcAttr = childAttr()
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The parent-death signal follows the thread that started the
		// child, not the process: this goroutine keeps that thread for
		// the child's whole life (it ends when the child has exited).
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return err
	}
	s.cmd, s.done = cmd, done

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.httpURL, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("livekit-server exited: %s", lastLines(s.Logs.String(), 5))
		case <-ctx.Done():
			s.stopLocked(syscall.SIGKILL)
			return fmt.Errorf("livekit-server did not answer on %s within 20 s", s.httpURL)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Stop stops the server: SIGTERM, then SIGKILL if it has not exited after
// two seconds (a server with open rooms waits for them on SIGTERM).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGTERM)
}

// Kill stops the server at once, as a crash would.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGKILL)
}

func (s *Server) stopLocked(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, sig)
	select {
	case <-s.done:
	case <-time.After(2 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
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

// FreePort asks the kernel for a free loopback port.
func FreePort(network string) (int, error) {
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

// TailBuffer keeps the last max bytes written to it.
type TailBuffer struct {
	mu  sync.Mutex
	Max int
	buf bytes.Buffer
}

func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.Max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *TailBuffer) String() string {
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
