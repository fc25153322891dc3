// Command bench runs concurrent conversations through a real
// livekit-server against an `alicia serve` process of its own, with the
// Qwen3 stand-in answering at a realistic pace, and prints the product's
// figures: how soon the bot greets, how long reasoning steps and answer
// sentences take from the model's token to the client, what a turn costs
// in packets, database writes and bot CPU, and the bot's memory per
// conversation.
//
//	go run ./bench -n 50
//
// The clients (Go LiveKit participants) and the stand-in run in this
// process; the bot runs alone in its own, so /proc shows its costs only.
// It needs what the tests need: livekit-server (scripts/install-livekit-
// server), and for -postgres on, Postgres at ALICIA_TEST_DATABASE_URL or
// 127.0.0.1:5432.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/wire"
)

type options struct {
	n, turns, joinParallel int
	// ns are the voice benchmark's sizes, run one after another.
	ns                  []int
	sttTransport, mic   string
	echo                echoPath
	interruptEvery      int
	voiceCycle          time.Duration
	keep                bool
	pace                string
	reasoning, postgres string
	start               string
	voice, streams      bool
	think, turnTimeout  time.Duration
	bot, profile        string
	profileFor          time.Duration
}

func main() {
	// The clients and the stand-in are the load, not what is measured: a
	// rarer collection in this process keeps its pauses out of the bot's
	// figures, which its clients' clock takes.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	var o options
	flag.Func("n", "concurrent conversations (default 50); with -voice, a list run one after another: 1,10,25,50,100", func(v string) error {
		o.ns = nil
		for _, f := range strings.Split(v, ",") {
			var k int
			if _, err := fmt.Sscan(strings.TrimSpace(f), &k); err != nil || k < 1 {
				return fmt.Errorf("%q is not a number of users", f)
			}
			o.ns = append(o.ns, k)
		}
		return nil
	})
	flag.IntVar(&o.turns, "turns", 3, "questions per conversation")
	flag.StringVar(&o.pace, "pace", "realistic", "model pace: realistic (50 ms to the first token, 11 ms a token), instant, or TTFT/token in ms as 200/25")
	flag.StringVar(&o.reasoning, "reasoning", "on", "on: the model reasons and clients show every step; off: answers only")
	flag.StringVar(&o.postgres, "postgres", "on", "on: the bot stores in a fresh Postgres database; off: in memory")
	flag.BoolVar(&o.streams, "streams", false, "clients read reasoning as LiveKit text streams (alicia.reasoning), as stock LiveKit apps do, instead of ReasoningStep envelopes")
	flag.BoolVar(&o.voice, "voice", false, "spoken turns: each user speaks espeak-ng questions on its microphone track and listens to the bot's; the speech servers run as a process of their own")
	flag.StringVar(&o.sttTransport, "stt-transport", "realtime", "with -voice: how the bot reaches the recogniser, realtime (WebSocket) or http")
	flag.StringVar(&o.mic, "mic", "noise", "with -voice: what the users' microphones send between phrases, noise (a quiet room's, 50 packets a second: a client without DTX) or dtx (a packet every 400 ms, as LiveKit's clients publish a microphone in a quiet room)")
	flag.Func("echo", "with -voice: off, or how each user's microphone picks up the bot's voice, as a phone on speaker without an echo canceller: a delay and a gain, as 150ms,-10dB (through a room: low-passed, with a reflection)", func(v string) (err error) {
		o.echo, err = parseEcho(v)
		return err
	})
	flag.IntVar(&o.interruptEvery, "interrupt-every", 3, "with -voice: every so many turns a user talks over the answer (0: never)")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's folder, with the bot's (and with -voice the speech servers') logs, and say where")
	flag.DurationVar(&o.voiceCycle, "voice-spread", 20*time.Second, "with -voice: the users' first questions spread over this long")
	flag.DurationVar(&o.think, "think", 2*time.Second, "a user's pause between reading an answer and asking again")
	flag.StringVar(&o.start, "start", "uniform", "uniform: the first questions spread over one whole turn and pause, so that the users' turns are evenly out of step; pause: spread over one pause only, so that most users' turns run at the same time (the peak load)")
	flag.DurationVar(&o.turnTimeout, "turn-timeout", 60*time.Second, "a turn without its final sentence by then failed")
	flag.IntVar(&o.joinParallel, "join-parallel", 16, "users joining at once")
	flag.StringVar(&o.bot, "bot", "", "alicia binary to run (default: built from ./cmd/alicia)")
	flag.StringVar(&o.profile, "profile", "", "write CPU profiles of the turns (the bot's, livekit-server's and this process's) and the bot's and livekit-server's heap profiles after them to files named with this prefix")
	flag.DurationVar(&o.profileFor, "profile-for", 20*time.Second, "how long the CPU profile of the turns runs")
	flag.Parse()
	if o.mic != "noise" && o.mic != "dtx" {
		fmt.Fprintln(os.Stderr, "bench: -mic is noise or dtx")
		os.Exit(2)
	}
	if o.start != "uniform" && o.start != "pause" {
		fmt.Fprintln(os.Stderr, "bench: -start is uniform or pause")
		os.Exit(2)
	}
	switch {
	case len(o.ns) == 0:
		o.ns = []int{50}
		if o.voice {
			o.ns = []int{10}
		}
	case len(o.ns) > 1 && !o.voice:
		fmt.Fprintln(os.Stderr, "bench: a list of sizes is for -voice; run the text benchmark once per size")
		os.Exit(2)
	}
	o.n = o.ns[0]
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runner := run
	if o.voice {
		runner = runVoice
	}
	if err := runner(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func pacing(s string) (standin.Pacing, error) {
	switch s {
	case "realistic":
		return standin.RealisticPacing, nil
	case "instant":
		return standin.Pacing{}, nil
	}
	var p standin.Pacing
	if _, err := fmt.Sscanf(s, "%f/%f", &p.TTFTMs, &p.TokenMs); err != nil {
		return p, fmt.Errorf("-pace %q: want realistic, instant or TTFT/token ms", s)
	}
	p.Jitter = standin.RealisticPacing.Jitter
	return p, nil
}

func run(ctx context.Context, o options) error {
	pace, err := pacing(o.pace)
	if err != nil {
		return err
	}
	lksdk.SetLogger(protoLogger.GetDiscardLogger())
	dir, done, err := runDir(o)
	if err != nil {
		return err
	}
	defer done()

	bot, err := botBinary(ctx, o, dir)
	if err != nil {
		return err
	}

	lk, err := lkserver.StartFresh(dir)
	if err != nil {
		return err
	}
	defer lk.Stop()

	// The stand-in, with a clock on its tokens.
	sv, err := standin.New(nil, pace, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	clock := newModelClock(sv)
	clockSrv := httptest.NewServer(clock)
	defer clockSrv.Close()

	var dbURL, botDBURL string
	var db *pgx.Conn
	var pgw *pgWire
	if o.postgres == "on" {
		var drop func()
		dbURL, drop, err = createDatabase(ctx)
		if err != nil {
			return err
		}
		defer drop()
		if db, err = pgx.Connect(ctx, dbURL); err != nil {
			return err
		}
		defer db.Close(context.Background())
		// The bot reaches the database through a proxy that counts its
		// statements and round trips (closed after the bot stops: defers
		// run in reverse).
		if botDBURL, pgw, err = proxied(dbURL); err != nil {
			return err
		}
		if pgw != nil {
			defer pgw.close()
		}
	}

	thinking := "on"
	if o.reasoning == "off" {
		thinking = "off"
	}
	b, err := startBot(ctx, bot, dir, lk, []string{"ALICIA_DATABASE_URL=" + botDBURL, "ALICIA_THINKING=" + thinking,
		"ALICIA_LLM_BACKEND=openai", "ALICIA_LLM_URL=" + clockSrv.URL + "/vllm/v1", "ALICIA_LLM_MODEL=Qwen3-8B"},
		"-max-sessions", fmt.Sprint(2*o.n+10))
	if err != nil {
		return err
	}
	defer b.stop()
	api, secret, pid, debugPort := b.api, b.secret, b.cmd.Process.Pid, b.debugPort
	rss0, _ := procRSS(pid)

	features := []string{wire.FeatureStreaming}
	if o.reasoning != "off" {
		features = append(features, wire.FeatureReasoningSteps)
	}
	// LiveKit's agent dispatcher asks every node which agents exist when a
	// worker registers (and once a minute), and holds a slot of its
	// 50-task pool for each room launched until that query times out, 5 s
	// later: more than about 25 rooms launched within those 5 s wait for
	// it. A warm-up conversation starts the query; the measured joins
	// begin once it is over, as they would on a server that has been up.
	fmt.Fprintln(os.Stderr, "bench: warm-up conversation, then 5 s for LiveKit's agent dispatcher...")
	warm, err := join(ctx, api, secret, "warm-up", features)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	// Its one question also times a turn on the idle machine, the length
	// of a user's cycle with the pause.
	warmStart := time.Now()
	wt := warm.turn(ctx, 1, o.turnTimeout)
	warm.room.Disconnect()
	if wt.err != "" {
		return fmt.Errorf("warm-up turn: %s", wt.err)
	}
	cycle := o.think
	if o.start == "uniform" && len(wt.sentences) > 0 {
		cycle += wt.sentences[len(wt.sentences)-1].at.Sub(wt.sent)
	}
	if !sleepCtx(ctx, 5*time.Second-time.Since(warmStart)) {
		return ctx.Err()
	}
	fmt.Fprintf(os.Stderr, "bench: %d users joining (%d at a time)...\n", o.n, o.joinParallel)
	joinStart := time.Now()
	joined, joinFailures := joinAll(o.n, o.joinParallel, func(i int) (*user, error) {
		u, err := join(ctx, api, secret, fmt.Sprintf("user%04d", i), features)
		if err == nil && o.streams {
			err = u.readStreams()
		}
		return u, err
	})
	joinTook := time.Since(joinStart)
	defer func() {
		for _, u := range joined {
			u.room.Disconnect()
		}
	}()
	if len(joined) == 0 {
		return fmt.Errorf("no user joined: %v", joinFailures[0])
	}
	fmt.Fprintf(os.Stderr, "bench: %d joined in %v; %d turns each...\n", len(joined), joinTook.Round(time.Millisecond), o.turns)

	// The turns: every user asks, reads the answer, pauses, asks again.
	rows0, err := dbWrites(ctx, db)
	if err != nil {
		return err
	}
	wire0, wire0At := pgw.counts(), time.Now()
	var pgCPU0 map[int]float64
	if db != nil {
		if pgCPU0, err = pgBackendCPU(ctx, db); err != nil {
			return err
		}
	}
	cpu0, _ := procCPU(pid)
	lkCPU0, _ := procCPU(lk.PID())
	selfCPU0, _ := procCPU(os.Getpid())
	// The three processes that share the cores, profiled over the same
	// window: the bot, livekit-server, and this one (clients, stand-in).
	profileDone := make(chan error, 3)
	if o.profile != "" {
		secs := int(o.profileFor.Seconds())
		go func() {
			profileDone <- fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", debugPort, secs), o.profile+"cpu.pprof")
		}()
		go func() {
			profileDone <- fetch(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", lk.DebugURL, secs), o.profile+"livekit-cpu.pprof")
		}()
		go func() { profileDone <- profileSelf(ctx, o.profileFor, o.profile+"bench-cpu.pprof") }()
	} else {
		for range 3 {
			profileDone <- nil
		}
	}
	results := make([][]turnResult, len(joined))
	var wg sync.WaitGroup
	turnStart := time.Now()
	for i, u := range joined {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread over a whole cycle, the users' turns stay evenly out
			// of step, as independent users' are; spread over the pause
			// alone, most of them stream at the same moment.
			if !sleepCtx(ctx, time.Duration(i)*cycle/time.Duration(len(joined))) {
				return
			}
			for k := range o.turns {
				r := u.turn(ctx, k+1, o.turnTimeout)
				results[i] = append(results[i], r)
				if r.err != "" || !sleepCtx(ctx, o.think) {
					return
				}
			}
		}()
	}
	wg.Wait()
	turnWall := time.Since(turnStart)
	cpu1, _ := procCPU(pid)
	lkCPU1, _ := procCPU(lk.PID())
	selfCPU1, _ := procCPU(os.Getpid())
	rss1, _ := procRSS(pid)
	rssPeak, _ := procPeakRSS(pid)
	for range 3 {
		if err := <-profileDone; err != nil {
			fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
		}
	}
	if o.profile != "" {
		if err := fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap", debugPort), o.profile+"heap.pprof"); err != nil {
			fmt.Fprintln(os.Stderr, "bench: heap profile:", err)
		}
		if err := fetch(ctx, lk.DebugURL+"/debug/pprof/heap", o.profile+"livekit-heap.pprof"); err != nil {
			fmt.Fprintln(os.Stderr, "bench: livekit-server heap profile:", err)
		}
	}
	rows1, err := settledWrites(ctx, db, rows0)
	if err != nil {
		return err
	}
	wire1, wireWall := pgw.counts(), time.Since(wire0At)
	var pgCPU float64
	var pgCPUOK bool
	if db != nil {
		pgCPU1, err := pgBackendCPU(ctx, db)
		if err != nil {
			return err
		}
		pgCPU, pgCPUOK = pgCPUSince(pgCPU0, pgCPU1)
	}

	rep := report{wire: wire1.minus(wire0), wireWall: wireWall, wireOn: pgw != nil, pgCPU: pgCPU, pgCPUOn: pgCPUOK,
		o: o, pace: pace, users: joined, joinFailures: joinFailures, results: results, clock: clock,
		cpu: cpu1 - cpu0, lkCPU: lkCPU1 - lkCPU0, selfCPU: selfCPU1 - selfCPU0, rss0: rss0, rss1: rss1, rssPeak: rssPeak, rows: rows1 - rows0, dbOn: db != nil, turnWall: turnWall, joinTook: joinTook, spread: cycle}
	rep.print(os.Stdout)
	return nil
}

// joinAll joins n users, parallel at a time, and returns those who
// joined and why the others did not.
func joinAll[U any](n, parallel int, join func(i int) (U, error)) (joined []U, failures []string) {
	users := make([]U, n)
	errs := make([]error, n)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			users[i], errs[i] = join(i)
		}()
	}
	wg.Wait()
	for i, u := range users {
		if errs[i] != nil {
			failures = append(failures, errs[i].Error())
		} else {
			joined = append(joined, u)
		}
	}
	return joined, failures
}

// botBinary is the bot binary, built as it ships unless -bot names one.
func botBinary(ctx context.Context, o options, dir string) (string, error) {
	if o.bot != "" {
		return o.bot, nil
	}
	bot := filepath.Join(dir, "alicia")
	build := exec.CommandContext(ctx, "go", "build", "-o", bot, "./cmd/alicia")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build alicia: %w", err)
	}
	return bot, nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// bot is an `alicia serve` process.
type bot struct {
	cmd *exec.Cmd
	// done is closed when the process has exited.
	done        chan struct{}
	api, secret string
	debugPort   int
	logFile     string
	cancel      context.CancelFunc
}

// startBot runs `alicia serve` against a LiveKit server with env added to
// this process's environment, and waits until it is ready.
func startBot(ctx context.Context, bin, dir string, lk *lkserver.Server, env []string, args ...string) (*bot, error) {
	httpPort, err := lkserver.FreePort("tcp")
	if err != nil {
		return nil, err
	}
	return startBotOn(ctx, httpPort, bin, dir, lk, env, args...)
}

// startBotOn is startBot with the HTTP API on a given port.
func startBotOn(ctx context.Context, httpPort int, bin, dir string, lk *lkserver.Server, env []string, args ...string) (*bot, error) {
	debugPort, err := lkserver.FreePort("tcp")
	if err != nil {
		return nil, err
	}
	b := &bot{api: fmt.Sprintf("http://127.0.0.1:%d", httpPort), secret: "bench-token-secret", debugPort: debugPort,
		done: make(chan struct{})}
	logFile, err := os.CreateTemp(dir, "bot-*.log")
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	b.logFile = logFile.Name()
	// The bot lives until stop, whatever happens to ctx meanwhile.
	botCtx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	cmd := exec.CommandContext(botCtx, bin, append([]string{"serve"}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	cmd.Env = append(os.Environ(),
		"ALICIA_LIVEKIT_URL="+lk.URL, "ALICIA_LIVEKIT_API_KEY="+lk.APIKey, "ALICIA_LIVEKIT_API_SECRET="+lk.APISecret,
		fmt.Sprintf("ALICIA_HTTP_ADDR=127.0.0.1:%d", httpPort), fmt.Sprintf("ALICIA_DEBUG_ADDR=127.0.0.1:%d", debugPort),
		"ALICIA_TOKEN_SECRET="+b.secret, "ALICIA_VOICE=off")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	b.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(b.done)
	}()
	if err := waitReady(ctx, b.api, b.done); err != nil {
		b.stop()
		return nil, fmt.Errorf("%w\n%s", err, b.logTail(20))
	}
	return b, nil
}

// stop ends the bot with SIGTERM (it hands its rooms over) and waits.
func (b *bot) stop() {
	b.cancel()
	<-b.done
}

func (b *bot) logTail(n int) string {
	tail, _ := os.ReadFile(b.logFile)
	return lastLines(string(tail), n)
}

// waitReady waits for the bot's /readyz: registered with LiveKit, its
// database answering.
func waitReady(ctx context.Context, api string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("alicia serve exited")
		case <-ctx.Done():
			return errors.New("alicia serve was not ready within 60 s")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func createDatabase(ctx context.Context) (string, func(), error) {
	admin := os.Getenv("ALICIA_TEST_DATABASE_URL")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres"
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w (-postgres off runs without)", err)
	}
	defer conn.Close(context.Background())
	name := fmt.Sprintf("alicia_bench_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(ctx)
		}
	}
	return u.String(), drop, nil
}

// proxied starts a counting proxy to the database at dbURL and returns
// the URL that reaches it through the proxy; with no TCP host to forward
// to (a Unix socket), the URL itself and no proxy.
func proxied(dbURL string) (string, *pgWire, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", nil, err
	}
	if u.Hostname() == "" || strings.HasPrefix(u.Query().Get("host"), "/") {
		return dbURL, nil, nil
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	w, err := startPGWire(target)
	if err != nil {
		return "", nil, err
	}
	u.Host = w.addr()
	return u.String(), w, nil
}

// wireCounts are a pgWire's counters at one moment.
type wireCounts struct{ statements, roundTrips, leaseTrips int64 }

func (w *pgWire) counts() wireCounts {
	if w == nil {
		return wireCounts{}
	}
	return wireCounts{w.statements.Load(), w.roundTrips.Load(), w.leaseTrips.Load()}
}

func (c wireCounts) minus(d wireCounts) wireCounts {
	return wireCounts{c.statements - d.statements, c.roundTrips - d.roundTrips, c.leaseTrips - d.leaseTrips}
}

// dbWrites is the rows inserted, updated and deleted in the bot's
// database so far, from Postgres's statistics.
func dbWrites(ctx context.Context, db *pgx.Conn) (int64, error) {
	if db == nil {
		return 0, nil
	}
	var n int64
	err := db.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables`).Scan(&n)
	return n, err
}

// settledWrites reads the write count once the bot's writer and Postgres's
// statistics (flushed by each backend about once a second) have caught
// up: when it has not moved for three readings a second apart.
func settledWrites(ctx context.Context, db *pgx.Conn, before int64) (int64, error) {
	if db == nil {
		return 0, nil
	}
	last, still := before, 0
	for range 30 {
		if !sleepCtx(ctx, time.Second) {
			return 0, ctx.Err()
		}
		if _, err := db.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			return 0, err
		}
		n, err := dbWrites(ctx, db)
		if err != nil {
			return 0, err
		}
		if n == last && n != before {
			if still++; still == 3 {
				return n, nil
			}
		} else {
			still = 0
		}
		last = n
	}
	return last, nil
}

func fetch(ctx context.Context, u, file string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// profileSelf writes this process's CPU profile over d.
func profileSelf(ctx context.Context, d time.Duration, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	sleepCtx(ctx, d)
	pprof.StopCPUProfile()
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// runDir is a run's folder, for the bot's binary and the servers' logs;
// done removes it, or with -keep says where it is.
func runDir(o options) (dir string, done func(), err error) {
	dir, err = os.MkdirTemp("", "alicia-bench-")
	if err != nil {
		return "", nil, err
	}
	if o.keep {
		return dir, func() { fmt.Fprintln(os.Stderr, "bench: the logs are in", dir) }, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
