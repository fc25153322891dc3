package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// procCPU is the CPU time (user + system) a process has used, in seconds,
// from /proc/<pid>/stat.
func procCPU(pid int) (float64, error) { return statCPU(pid, 2) }

// procTreeCPU is procCPU with that of the children the process has
// waited for: the speech servers run an engine process per request.
func procTreeCPU(pid int) (float64, error) { return statCPU(pid, 4) }

// statCPU sums the first n CPU-time fields of /proc/<pid>/stat: utime,
// stime, cutime, cstime.
func statCPU(pid, n int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields count from after it.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 11+n {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var sum float64
	for _, f := range fields[11 : 11+n] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		sum += v
	}
	return sum / clockTicks, nil
}

// procRSS is a process's resident set in bytes, from /proc/<pid>/status.
func procRSS(pid int) (int64, error) { return procStatusBytes(pid, "VmRSS") }

// procPeakRSS is the largest resident set the process has had.
func procPeakRSS(pid int) (int64, error) { return procStatusBytes(pid, "VmHWM") }

func procStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// pgWire is a TCP proxy between the bot and Postgres that counts, from the
// frontend's side of the wire protocol, what the bot asks of the
// database: statements (Execute and simple Query messages; a Parse or a
// Describe alone runs nothing) and round trips (a message sent after
// Postgres has answered starts a new one). It sees the bot's traffic
// only, whatever the bot's code is, so that two builds can be compared.
type pgWire struct {
	ln         net.Listener
	target     string
	statements atomic.Int64
	roundTrips atomic.Int64
	// leaseTrips are the round trips that renew or end the process's
	// lease: its liveness, a few a second whatever its load, not the
	// turns' work.
	leaseTrips atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startPGWire listens on a free loopback port and forwards each
// connection to target (host:port).
func startPGWire(target string) (*pgWire, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &pgWire{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *pgWire) addr() string { return p.ln.Addr().String() }

// close stops accepting, cuts the connections still open and waits for
// their goroutines.
func (p *pgWire) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers a connection for close; false once closing.
func (p *pgWire) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *pgWire) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *pgWire) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
			if err != nil {
				_ = client.Close()
				return
			}
			if !p.track(client, server) {
				_ = client.Close()
				_ = server.Close()
				return
			}
			defer p.untrack(client, server)
			p.relay(client, server)
		}()
	}
}

// relay forwards one connection both ways until either side ends it.
func (p *pgWire) relay(client, server net.Conn) {
	var answered atomic.Bool
	back := make(chan struct{})
	go func() {
		defer close(back)
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				answered.Store(true)
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = client.Close() // ends the frontend's side below
				return
			}
		}
	}()
	_ = p.frontend(client, server, &answered)
	_ = server.Close() // ends the goroutine above
	<-back
}

// frontend copies the bot's messages to Postgres one by one, counting
// them. TLS is refused (the proxy must read the messages; a client that
// prefers TLS goes on in plain text), so the bot's URL must not require
// it.
func (p *pgWire) frontend(client, server net.Conn, answered *atomic.Bool) error {
	in := bufio.NewReaderSize(client, 64<<10)
	out := bufio.NewWriterSize(server, 64<<10)
	// The startup phase: messages with a length and no type.
	for {
		var head [8]byte
		if _, err := io.ReadFull(in, head[:4]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(head[:4]))
		if n < 8 || n > 1<<20 {
			return fmt.Errorf("startup message of %d bytes", n)
		}
		if _, err := io.ReadFull(in, head[4:8]); err != nil {
			return err
		}
		code := binary.BigEndian.Uint32(head[4:8])
		if code == 80877103 || code == 80877104 { // SSLRequest, GSSENCRequest
			if _, err := client.Write([]byte{'N'}); err != nil {
				return err
			}
			continue
		}
		if _, err := out.Write(head[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(out, in, int64(n-8)); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
		break
	}
	// The statements this connection prepared that touch the leases, by
	// name, and whether the current round trip is one of theirs.
	leaseStmts := map[string]bool{}
	var leaseTrip bool
	for {
		// What the bot sent at once goes on at once: flush before a read
		// that may wait.
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				return err
			}
		}
		var head [5]byte
		if _, err := io.ReadFull(in, head[:]); err != nil {
			return err
		}
		if answered.Swap(false) {
			p.roundTrips.Add(1)
			leaseTrip = false
		}
		switch head[0] {
		case 'E', 'Q':
			p.statements.Add(1)
		}
		n := int64(binary.BigEndian.Uint32(head[1:]))
		if n < 4 {
			return fmt.Errorf("message %q of length %d", head[0], n)
		}
		if _, err := out.Write(head[:]); err != nil {
			return err
		}
		switch head[0] {
		case 'P', 'B', 'Q': // Parse, Bind and Query name what they run
			body := make([]byte, n-4)
			if _, err := io.ReadFull(in, body); err != nil {
				return err
			}
			if _, err := out.Write(body); err != nil {
				return err
			}
			if isLease(head[0], body, leaseStmts) && !leaseTrip {
				leaseTrip = true
				p.leaseTrips.Add(1)
			}
		default:
			if _, err := io.CopyN(out, in, n-4); err != nil {
				return err
			}
		}
	}
}

// isLease says whether a Parse, Bind or Query message runs a statement on
// the leases table, and remembers the prepared statements that do.
func isLease(kind byte, body []byte, stmts map[string]bool) bool {
	cstr := func(b []byte) (string, []byte) {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return string(b), nil
		}
		return string(b[:i]), b[i+1:]
	}
	switch kind {
	case 'Q':
		q, _ := cstr(body)
		return strings.Contains(q, "alicia_worker_leases")
	case 'P':
		name, rest := cstr(body)
		q, _ := cstr(rest)
		lease := strings.Contains(q, "alicia_worker_leases")
		stmts[name] = lease
		return lease
	default: // 'B': the portal, then the statement
		_, rest := cstr(body)
		name, _ := cstr(rest)
		return stmts[name]
	}
}

// pgBackendCPU is the CPU time (user + system, in seconds) each Postgres
// backend serving the connection's database has used, by process id,
// leaving out the connection's own. It is empty when the backends are not
// processes of this machine (a remote server).
func pgBackendCPU(ctx context.Context, db *pgx.Conn) (map[int]float64, error) {
	rows, err := db.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	out := map[int]float64{}
	for _, pid := range pids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		if cpu, err := procCPU(int(pid)); err == nil {
			out[int(pid)] = cpu
		}
	}
	return out, nil
}

// pgCPUSince is the CPU the backends used since before; a backend that
// started since counts from zero. Backends that ended meanwhile are
// missed, and so are the server's background processes (WAL writer,
// checkpointer), which serve every database.
func pgCPUSince(before, after map[int]float64) (float64, bool) {
	if len(after) == 0 {
		return 0, false
	}
	var sum float64
	for pid, cpu := range after {
		sum += cpu - before[pid]
	}
	return sum, true
}
