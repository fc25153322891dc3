package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"
)

// Chromium is the machine's Chromium (Debian's chromium package, or
// $ALICIA_CHROMIUM); tests never download a browser.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ALICIA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Unavailable(t, "chromium is not installed (apt-get install chromium; .ci/run does)")
	return ""
}

// ArtifactsDir is where tests keep what explains a failure (a browser
// test's screenshots, the audio a talk-over client heard): web/artifacts,
// which git ignores, or $ALICIA_ARTIFACTS_DIR.
func ArtifactsDir() string {
	if d := os.Getenv("ALICIA_ARTIFACTS_DIR"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "web", "artifacts")
}

// Browser runs a Node script from NodeDir that drives Chromium through
// playwright-core (see node/browser.mjs: launch, packet capture,
// screenshots): input goes to the script as JSON on stdin, and the JSON it
// prints is decoded into out. A failing script fails the test with its
// stderr, which holds the page's console.
func Browser(t testing.TB, ctx context.Context, script string, input, out any) {
	t.Helper()
	chromium := Chromium(t)
	node := NodePackages(t, NodeDir())
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(NodeDir(), script))
	cmd.Dir = NodeDir()
	cmd.Env = append(os.Environ(), "ALICIA_CHROMIUM="+chromium, "ALICIA_ARTIFACTS="+ArtifactsDir())
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The browser must not outlive a cancelled test: the script and the
	// Chromium it launches share a process group, killed as one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("browser script %s: %v\n%s", script, err, stderr.Bytes())
	}
	if out != nil {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			t.Fatalf("browser script %s printed no JSON result: %v\n%s\n%s", script, err, stdout.Bytes(), stderr.Bytes())
		}
	}
}

// CapturedPacket is one data-channel message of a page, as node/browser.mjs
// records it.
type CapturedPacket struct {
	Dir     string  `json:"dir"` // "in" or "out"
	Channel string  `json:"channel"`
	At      float64 `json:"at"` // ms since the page loaded
	Data    []byte  `json:"data"`
}

// UserPacket is the user payload of a captured LiveKit DataPacket.
type UserPacket struct {
	Dir     string
	Topic   string
	Payload []byte
}

// UserPackets decodes captured messages as LiveKit DataPackets and keeps
// their user payloads (other packets, such as stream chunks, are skipped).
func UserPackets(pkts []CapturedPacket) []UserPacket {
	var out []UserPacket
	for _, p := range pkts {
		var dp livekit.DataPacket
		if proto.Unmarshal(p.Data, &dp) != nil {
			continue
		}
		if u := dp.GetUser(); u != nil {
			out = append(out, UserPacket{Dir: p.Dir, Topic: u.GetTopic(), Payload: u.Payload})
		}
	}
	return out
}

// Page is what OpenPage loads and watches.
type Page struct {
	URL string `json:"url"`
	// LocalStorage is set before the page's own code runs.
	LocalStorage map[string]string `json:"localStorage,omitempty"`
	// WaitFor is a JavaScript expression watched until it is truthy.
	WaitFor string `json:"waitFor,omitempty"`
	// Evaluate is a JavaScript expression whose value comes back as Value.
	Evaluate  string         `json:"evaluate,omitempty"`
	Viewport  map[string]int `json:"viewport,omitempty"`
	TimeoutMs int            `json:"timeoutMs,omitempty"`
	// Screenshot names a PNG written into ArtifactsDir.
	Screenshot   string   `json:"screenshot,omitempty"`
	ChromiumArgs []string `json:"chromiumArgs,omitempty"`
}

// PageResult is what OpenPage saw.
type PageResult struct {
	Value      json.RawMessage  `json:"value"`
	Packets    []CapturedPacket `json:"packets"`
	Logs       []string         `json:"logs"`
	Screenshot string           `json:"screenshot"`
}

// OpenPage loads a page in Chromium, waits for p.WaitFor, evaluates
// p.Evaluate and returns the value with the page's data-channel capture
// (decode it with UserPackets) and console.
func OpenPage(t testing.TB, ctx context.Context, p Page) PageResult {
	t.Helper()
	var r PageResult
	Browser(t, ctx, "open-page.mjs", p, &r)
	return r
}
