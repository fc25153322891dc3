package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/storage"
)

// composeFile is the part of `docker-compose config`'s output the checks
// read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       map[string]any    `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []struct {
		Published any    `yaml:"published"`
		Target    int    `yaml:"target"`
		Protocol  string `yaml:"protocol"`
	} `yaml:"ports"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck map[string]any `yaml:"healthcheck"`
	Profiles    []string       `yaml:"profiles"`
	Volumes     []string       `yaml:"volumes"`
	Deploy      struct {
		Resources struct {
			Reservations struct {
				Devices []struct {
					Capabilities []string `yaml:"capabilities"`
				} `yaml:"devices"`
			} `yaml:"reservations"`
		} `yaml:"resources"`
	} `yaml:"deploy"`
}

// requiredVars are the variables the compose file marks ${VAR:?…}.
func requiredVars(t *testing.T, raw []byte) []string {
	t.Helper()
	var vars []string
	uncommented := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(raw, nil)
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+):\?`).FindAllSubmatch(uncommented, -1) {
		if v := string(m[1]); !slices.Contains(vars, v) {
			vars = append(vars, v)
		}
	}
	return vars
}

// composeConfig runs `docker-compose config` on the repository's compose
// file with exactly env (no .env file, nothing from this process).
func composeConfig(t *testing.T, bin, root string, env map[string]string) ([]byte, error) {
	t.Helper()
	noEnv := filepath.Join(t.TempDir(), "empty.env")
	if err := os.WriteFile(noEnv, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--env-file", noEnv, "-f", filepath.Join(root, "docker-compose.yml"),
		"--project-directory", root, "config")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// serveReads lists the ALICIA_* variables `alicia serve` reads, from the
// program itself: every setting is a flag whose variable envName names.
func serveReads(t *testing.T) map[string]bool {
	t.Helper()
	reads := map[string]bool{}
	(&serveConfig{}).flags().VisitAll(func(f *flag.Flag) { reads[envName(f.Name)] = true })
	for _, must := range []string{"ALICIA_LIVEKIT_URL", "ALICIA_DATABASE_URL", "ALICIA_LLM_URL", "ALICIA_STT_URL"} {
		if !reads[must] {
			t.Fatalf("found no %s in what serve reads; the derivation is broken: %v", must, reads)
		}
	}
	return reads
}

// The compose file as docker-compose reads it: every service pinned and
// wired, Alicia given only settings serve reads and every setting a
// production deployment needs, and nothing secret written in it.
func TestComposeFile(t *testing.T) {
	bin := testenv.Program(t, "docker-compose", "Debian package docker-compose")
	root := testenv.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}

	// Secrets come from the environment, and compose refuses to run
	// without each of them.
	required := requiredVars(t, raw)
	for _, v := range []string{"LIVEKIT_API_SECRET", "POSTGRES_PASSWORD", "REDIS_PASSWORD", "ALICIA_TOKEN_SECRET"} {
		if !slices.Contains(required, v) {
			t.Errorf("secret %s is not a required variable (${%s:?…})", v, v)
		}
	}
	env := map[string]string{}
	for _, v := range required {
		env[v] = "value-of-" + strings.ToLower(v)
	}
	env["LIVEKIT_NODE_IP"] = "203.0.113.7"
	for _, v := range required {
		without := map[string]string{}
		for k, val := range env {
			if k != v {
				without[k] = val
			}
		}
		if _, err := composeConfig(t, bin, root, without); err == nil || !strings.Contains(err.Error(), "required") {
			t.Errorf("without %s docker-compose config did not refuse: %v", v, err)
		}
	}
	out, err := composeConfig(t, bin, root, env)
	if err != nil {
		t.Fatalf("docker-compose config: %v", err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(out, &cf); err != nil {
		t.Fatalf("docker-compose config output: %v\n%s", err, out)
	}
	for _, v := range required {
		if bytes.Contains(raw, []byte(env[v])) {
			t.Errorf("the compose file holds the value of %s", v)
		}
	}

	for _, name := range []string{"alicia", "livekit", "redis", "postgres", "vllm", "stt", "tts"} {
		if _, ok := cf.Services[name]; !ok {
			t.Errorf("no %s service", name)
		}
	}
	// Every image is pinned to a tag other than latest, so that a restart
	// never upgrades a server.
	for name, s := range cf.Services {
		if s.Image == "" {
			t.Errorf("%s: no image", name)
			continue
		}
		ref := s.Image[strings.LastIndex(s.Image, "/")+1:]
		tag := ref[strings.Index(ref, ":")+1:]
		if !strings.Contains(ref, ":") || tag == "latest" {
			t.Errorf("%s: image %q is not pinned to a tag", name, s.Image)
		}
		for dep := range s.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				t.Errorf("%s depends on a service that does not exist: %s", name, dep)
			}
		}
	}
	for _, name := range []string{"stt", "tts"} {
		if s := cf.Services[name]; !slices.Contains(s.Profiles, "voice") {
			t.Errorf("%s is not optional (profile voice): %v", name, s.Profiles)
		}
	}
	for _, name := range []string{"postgres", "redis", "vllm"} {
		if ports := cf.Services[name].Ports; len(ports) != 0 {
			t.Errorf("%s publishes ports %v; only Alicia and LiveKit face the network", name, ports)
		}
	}

	// LiveKit: its configuration file, its ports as that file sets them,
	// the key pair Alicia uses, Redis for more than one node.
	lk := cf.Services["livekit"]
	var lkConf struct {
		Port int `yaml:"port"`
		RTC  struct {
			TCPPort int `yaml:"tcp_port"`
			UDPPort int `yaml:"udp_port"`
		} `yaml:"rtc"`
		Redis struct {
			Address string `yaml:"address"`
		} `yaml:"redis"`
		Webhook struct {
			APIKey string   `yaml:"api_key"`
			URLs   []string `yaml:"urls"`
		} `yaml:"webhook"`
	}
	lkRaw, err := os.ReadFile(filepath.Join(root, "livekit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(lkRaw, &lkConf); err != nil {
		t.Fatalf("livekit.yaml: %v", err)
	}
	if !slices.ContainsFunc(lk.Volumes, func(v string) bool {
		return strings.HasPrefix(v, filepath.Join(root, "livekit.yaml")+":")
	}) || !slices.Contains(lk.Command, "--config") {
		t.Errorf("livekit does not run with livekit.yaml: volumes %v, command %v", lk.Volumes, lk.Command)
	}
	publishes := func(s composeService, port int, proto string) bool {
		for _, p := range s.Ports {
			pub, _ := strconv.Atoi(strings.TrimSpace(strings.Trim(strings.TrimSpace(anyString(p.Published)), `"`)))
			if p.Target == port && pub == port && (p.Protocol == proto || (p.Protocol == "" && proto == "tcp")) {
				return true
			}
		}
		return false
	}
	if !publishes(lk, lkConf.Port, "tcp") || !publishes(lk, lkConf.RTC.TCPPort, "tcp") || !publishes(lk, lkConf.RTC.UDPPort, "udp") {
		t.Errorf("livekit publishes %+v, livekit.yaml listens on %d, %d/tcp, %d/udp", lk.Ports, lkConf.Port, lkConf.RTC.TCPPort, lkConf.RTC.UDPPort)
	}
	// LiveKit's webhooks reach Alicia (the takeover of a killed worker's
	// rooms), signed with the key Alicia verifies them with.
	if lkConf.Webhook.APIKey == "" || !strings.HasPrefix(lk.Environment["LIVEKIT_KEYS"], lkConf.Webhook.APIKey+": ") {
		t.Errorf("livekit.yaml signs webhooks with %q, not the key in LIVEKIT_KEYS", lkConf.Webhook.APIKey)
	}
	webhookOK := false
	for _, raw := range lkConf.Webhook.URLs {
		u, err := url.Parse(raw)
		_, httpPort, _ := net.SplitHostPort(cf.Services["alicia"].Environment["ALICIA_HTTP_ADDR"])
		if err == nil && u.Hostname() == "alicia" && u.Port() == httpPort && u.Path == "/v1/livekit/webhook" {
			webhookOK = true
		}
	}
	if !webhookOK {
		t.Errorf("livekit.yaml's webhooks %v do not reach Alicia's /v1/livekit/webhook", lkConf.Webhook.URLs)
	}
	redisHost, _, _ := net.SplitHostPort(lkConf.Redis.Address)
	if _, ok := cf.Services[redisHost]; !ok {
		t.Errorf("livekit.yaml's Redis %q is not a service", lkConf.Redis.Address)
	}
	if _, ok := lk.DependsOn[redisHost]; !ok {
		t.Errorf("livekit does not depend on %s", redisHost)
	}
	if lk.Environment["REDIS_PASSWORD"] != env["REDIS_PASSWORD"] || cf.Services[redisHost].Environment["REDIS_PASSWORD"] != env["REDIS_PASSWORD"] {
		t.Error("livekit and Redis do not share REDIS_PASSWORD")
	}
	if lk.Environment["GOGC"] != lkserver.GOGC {
		t.Errorf("livekit runs with GOGC %q, the benchmark's and the tests' livekit-server with %q", lk.Environment["GOGC"], lkserver.GOGC)
	}

	// vLLM: Qwen3's parsers and a GPU.
	vllm := cf.Services["vllm"]
	cmdline := strings.Join(vllm.Command, " ")
	for _, want := range []string{"--reasoning-parser qwen3", "--enable-auto-tool-choice", "--tool-call-parser hermes"} {
		if !strings.Contains(cmdline, want) {
			t.Errorf("vllm command lacks %s: %s", want, cmdline)
		}
	}
	if d := vllm.Deploy.Resources.Reservations.Devices; len(d) == 0 || !slices.Contains(d[0].Capabilities, "gpu") {
		t.Errorf("vllm reserves no GPU: %+v", d)
	}

	// Alicia: built here, given only what serve reads, and everything it
	// needs to run in production rather than in its development fallbacks.
	a := cf.Services["alicia"]
	if a.Build == nil || a.Build["dockerfile"] != "cmd/alicia/Dockerfile" {
		t.Errorf("alicia is not built from cmd/alicia/Dockerfile: %v", a.Build)
	}
	reads := serveReads(t)
	for k := range a.Environment {
		if strings.HasPrefix(k, "ALICIA_") && !reads[k] {
			t.Errorf("compose gives Alicia %s, which serve does not read", k)
		}
	}
	aenv := a.Environment
	// Without these serve starts its own livekit-server, answers with the
	// stand-in or keeps conversations in memory.
	for _, k := range []string{"ALICIA_LIVEKIT_URL", "ALICIA_LLM_URL", "ALICIA_DATABASE_URL", "ALICIA_TOKEN_SECRET"} {
		if aenv[k] == "" {
			t.Errorf("Alicia is not given %s", k)
		}
	}
	lkKey, lkSecret, _ := strings.Cut(lk.Environment["LIVEKIT_KEYS"], ": ")
	if lkSecret != env["LIVEKIT_API_SECRET"] || aenv["ALICIA_LIVEKIT_API_KEY"] != lkKey || aenv["ALICIA_LIVEKIT_API_SECRET"] != lkSecret {
		t.Errorf("Alicia's LiveKit key pair (%s, %s) is not LiveKit's (%s)", aenv["ALICIA_LIVEKIT_API_KEY"], aenv["ALICIA_LIVEKIT_API_SECRET"], lk.Environment["LIVEKIT_KEYS"])
	}
	// Each URL names a service Alicia waits for, on the port it serves.
	dependsOnURL := func(k string, port int, condition string) {
		u, err := url.Parse(aenv[k])
		if err != nil {
			t.Errorf("%s: %v", k, err)
			return
		}
		if u.Port() != strconv.Itoa(port) {
			t.Errorf("%s = %s: port is not %d", k, aenv[k], port)
		}
		dep, ok := a.DependsOn[u.Hostname()]
		switch {
		case !ok:
			t.Errorf("%s names %q, which Alicia does not depend on", k, u.Hostname())
		case dep.Condition != condition:
			t.Errorf("Alicia waits for %s with %q, want %q", u.Hostname(), dep.Condition, condition)
		}
		if condition == "service_healthy" && cf.Services[u.Hostname()].Healthcheck == nil {
			t.Errorf("%s has no health check to wait for", u.Hostname())
		}
	}
	dependsOnURL("ALICIA_LIVEKIT_URL", lkConf.Port, "service_started")
	dependsOnURL("ALICIA_DATABASE_URL", 5432, "service_healthy")
	dependsOnURL("ALICIA_LLM_URL", 8000, "service_healthy")
	if !strings.Contains(aenv["ALICIA_DATABASE_URL"], env["POSTGRES_PASSWORD"]) {
		t.Error("Alicia's database URL does not carry POSTGRES_PASSWORD")
	}
	if !strings.Contains(cmdline, "--model "+aenv["ALICIA_LLM_MODEL"]) {
		t.Errorf("Alicia asks for model %q, vllm serves: %s", aenv["ALICIA_LLM_MODEL"], cmdline)
	}
	// The settings parse as serve parses them.
	for k, v := range aenv {
		t.Setenv(k, v)
	}
	sc, err := parseServeConfig(nil, io.Discard)
	if err != nil {
		t.Fatalf("serve refuses the compose file's settings: %v", err)
	}
	if _, err := llm.New(sc.LLM); err != nil {
		t.Errorf("model settings: %v", err)
	}
	if _, err := storage.Open(context.Background(), storage.Config{Reasoning: storage.ReasoningMode(aenv["ALICIA_STORE_REASONING"]),
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Errorf("storage settings: %v", err)
	}
	host, port, err := net.SplitHostPort(aenv["ALICIA_HTTP_ADDR"])
	if err != nil || (host != "" && !net.ParseIP(host).IsUnspecified()) {
		t.Errorf("ALICIA_HTTP_ADDR %q is not reachable from outside the container", aenv["ALICIA_HTTP_ADDR"])
	}
	if p, _ := strconv.Atoi(port); !publishes(a, p, "tcp") {
		t.Errorf("Alicia's HTTP port %s is not published: %+v", port, a.Ports)
	}
}

func anyString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	}
	return ""
}

// The Dockerfile's final image: non-root, its health check a command the
// binary has, and no secret among its settings.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "cmd", "alicia", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`\\\n`).ReplaceAllString(string(raw), " ")
	stages := regexp.MustCompile(`(?m)^FROM `).Split(text, -1)
	final := stages[len(stages)-1]
	user := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(final)
	if user == nil || strings.HasPrefix(user[1], "0") || strings.HasPrefix(user[1], "root") {
		t.Errorf("the final stage does not run as a non-root user: %v", user)
	}
	hc := regexp.MustCompile(`(?m)^HEALTHCHECK .*CMD \["([^"]+)", "([^"]+)"`).FindStringSubmatch(final)
	if hc == nil {
		t.Fatal("no exec-form HEALTHCHECK in the final stage")
	}
	if !slices.ContainsFunc(commands, func(c command) bool { return c.name == hc[2] }) {
		t.Errorf("HEALTHCHECK runs %q, which alicia does not have", hc[2])
	}
	if len(stages) < 3 {
		t.Errorf("not a multi-stage build: %d stages", len(stages)-1)
	}
	for _, m := range regexp.MustCompile(`(?m)^(?:ENV|ARG) (\S+?)[= ]`).FindAllStringSubmatch(text, -1) {
		if regexp.MustCompile(`SECRET|PASSWORD|KEY|TOKEN`).MatchString(m[1]) {
			t.Errorf("the image bakes in %s", m[1])
		}
	}
}
