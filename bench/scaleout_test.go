package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/redis/go-redis/v9"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/wire"
)

// redisDB claims an empty database of the machine's Redis for one test's
// LiveKit nodes, and empties it afterwards. The claim is a key in
// database 0 set only if absent, so that tests running at once (in this
// process or another) never share a database; it expires on its own if
// a test dies without its cleanup.
func redisDB(t *testing.T) (string, int) {
	t.Helper()
	addr := os.Getenv("ALICIA_TEST_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	claims := redis.NewClient(&redis.Options{Addr: addr})
	owner := fmt.Sprintf("%d/%s/%d", os.Getpid(), t.Name(), rand.Uint64())
	start := rand.IntN(15)
	for i := range 15 {
		db := 1 + (start+i)%15
		key := fmt.Sprintf("alicia-test:redis-db:%d", db)
		ok, err := claims.SetNX(ctx, key, owner, 30*time.Minute).Result()
		if err != nil {
			claims.Close()
			testenv.Unavailable(t, "Redis is not reachable at %s: %v", addr, err)
		}
		if !ok {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: addr, DB: db})
		if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
			// Left over by something else: not ours to empty.
			c.Close()
			claims.Del(ctx, key)
			continue
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.FlushDB(ctx).Err()
			c.Close()
			claims.Del(ctx, key)
			claims.Close()
		})
		return addr, db
	}
	claims.Close()
	t.Fatalf("no empty database in the Redis at %s", addr)
	return "", 0
}

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// acceptedJobs reads a bot's count of jobs it took from its /metrics.
func acceptedJobs(t *testing.T, b *bot) int {
	t.Helper()
	resp, err := http.Get(b.api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), `alicia_room_jobs_total{outcome="accepted"} `); ok {
			n, _ := strconv.ParseFloat(rest, 64)
			return int(n)
		}
	}
	return 0
}

// Two livekit-server nodes share one Redis; two `alicia serve` processes
// under one agent name connect one to each node. Forty users, half of
// them sent to each node by the token endpoint of the bot they asked,
// all get answers, and both processes take rooms. Every room goes through
// LiveKit's dispatch here (a process otherwise joins the rooms it opens
// for its own tokens), so that rooms are served across nodes.
func TestScaleOutTwoNodesTwoWorkers(t *testing.T) {
	bin := processTest(t, "builds alicia and runs four servers")
	nodes := twoNodes(t, "scaleout")
	env, _ := botBackends(t)
	env = append(env, "ALICIA_DISPATCH_ONLY=true")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bots := botOnEach(ctx, t, bin, nodes, env)

	lksdk.SetLogger(protoLogger.GetDiscardLogger())
	const n = 40
	answers := make([]error, n)
	roomNode := make([]string, n) // user i's room, created on node i%2+1
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			b := bots[i%2]
			u, err := join(ctx, b.api, b.secret, fmt.Sprintf("user%02d", i), []string{wire.FeatureStreaming, wire.FeatureReasoningSteps})
			if err != nil {
				answers[i] = fmt.Errorf("join via node %d: %w", i%2+1, err)
				return
			}
			defer u.room.Disconnect()
			roomNode[i] = u.convID
			if r := u.turn(ctx, 1, time.Minute); r.err != "" {
				answers[i] = fmt.Errorf("user%02d on node %d: %s", i, i%2+1, r.err)
			} else if len(r.sentences) == 0 || len(r.steps) == 0 {
				answers[i] = fmt.Errorf("user%02d on node %d: %d sentences, %d steps", i, i%2+1, len(r.sentences), len(r.steps))
			}
		}()
	}
	wg.Wait()
	for _, err := range answers {
		if err != nil {
			t.Error(err)
		}
	}
	a, b := acceptedJobs(t, bots[0]), acceptedJobs(t, bots[1])
	t.Logf("rooms taken: %d by the worker on node 1, %d by the worker on node 2", a, b)
	if a+b != n || a == 0 || b == 0 {
		t.Errorf("rooms were not spread over both workers: %d and %d of %d\nbot 1:\n%s\nbot 2:\n%s", a, b, n, bots[0].logTail(10), bots[1].logTail(10))
	}
	// Jobs cross nodes: a worker connected to one node serves rooms whose
	// user is on the other, through Redis.
	crossed := 0
	for w, b := range bots {
		log, err := os.ReadFile(b.logFile)
		if err != nil {
			t.Fatal(err)
		}
		for i, room := range roomNode {
			if i%2 != w && room != "" && strings.Contains(string(log), "room="+room+" ") {
				crossed++
			}
		}
	}
	t.Logf("%d of %d rooms served by the worker on the other node", crossed, n)
	if crossed == 0 {
		t.Error("no room was served across nodes")
	}
}
