package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/lkserver"
)

// Cluster is a throwaway Postgres server a test may stop and start, for
// outages the shared server must not suffer.
type Cluster struct {
	URL  string
	t    testing.TB
	bin  string
	data string
	port int
	as   []string // how to run the server's tools (as the postgres user when root)
}

// StartCluster initialises and starts a private Postgres on a free port;
// it is stopped and removed when the test ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := postgresBinDir()
	if bin == "" {
		Unavailable(t, "Postgres server binaries (initdb, pg_ctl) not found; install the postgresql package")
	}
	dir, err := os.MkdirTemp("", "alicia-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &Cluster{t: t, bin: bin, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		// Postgres refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			Unavailable(t, "running as root and no postgres user to run a test cluster as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.as = []string{"runuser", "-u", "postgres", "--"}
	}
	if out, err := c.run("initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if c.port, err = lkserver.FreePort("tcp"); err != nil {
		t.Fatal(err)
	}
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	c.Start()
	t.Cleanup(func() { _, _ = c.run("pg_ctl", "-D", c.data, "stop", "-m", "immediate", "-w") })
	return c
}

func (c *Cluster) run(tool string, args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, c.as...), filepath.Join(c.bin, tool)), args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off", c.port, filepath.Dir(c.data))
	if out, err := c.run("pg_ctl", "-D", c.data, "-o", opts, "-l", filepath.Join(filepath.Dir(c.data), "log"), "-w", "start"); err != nil {
		c.t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
}

// Stop stops the server at once, dropping its connections.
func (c *Cluster) Stop() {
	c.t.Helper()
	if out, err := c.run("pg_ctl", "-D", c.data, "stop", "-m", "fast", "-w"); err != nil {
		c.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func postgresBinDir() string {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := string(bytes.TrimSpace(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}
