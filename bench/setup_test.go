package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
)

// processTest starts a test that runs alicia serve processes: skipped
// under -short (it costs minutes), failed where livekit-server is missing,
// and given the bot binary.
func processTest(t *testing.T, cost string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(cost)
	}
	if _, err := lkserver.Binary(); err != nil {
		testenv.Unavailable(t, "%v", err)
	}
	lksdk.SetLogger(protoLogger.GetDiscardLogger())
	return testenv.AliciaBinary(t)
}

// twoNodes starts two livekit-server nodes sharing a Redis database of
// their own, under one key.
func twoNodes(t *testing.T, key string) []*lkserver.Server {
	t.Helper()
	redisAddr, db := redisDB(t)
	nodes := make([]*lkserver.Server, 2)
	for i := range nodes {
		n, err := lkserver.StartNode(t.TempDir(), lkserver.NodeConfig{APIKey: key, APISecret: strings.Repeat("s3cr3t", 6), RedisAddr: redisAddr, RedisDB: db})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		nodes[i] = n
	}
	return nodes
}

// botBackends serves the Qwen3 stand-in and makes a database for the
// test's bots, and returns the bots' settings for them and the database.
func botBackends(t *testing.T) (env []string, dbURL string) {
	t.Helper()
	return botBackendsWith(t, nil, standin.RealisticPacing)
}

// botBackendsWith is botBackends with the stand-in's scenarios (before
// its default one) and pacing.
func botBackendsWith(t *testing.T, scenarios []standin.Scenario, pacing standin.Pacing) (env []string, dbURL string) {
	t.Helper()
	sv, err := standin.New(scenarios, pacing, nil)
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(sv.Handler())
	t.Cleanup(model.Close)
	dbURL = testenv.Database(t)
	return []string{"ALICIA_DATABASE_URL=" + dbURL, "ALICIA_LLM_BACKEND=openai", "ALICIA_LLM_URL=" + model.URL + "/vllm/v1", "ALICIA_LLM_MODEL=Qwen3-8B"}, dbURL
}

// botOnEach starts one alicia serve on each node, stopped when the test
// ends.
func botOnEach(ctx context.Context, t *testing.T, bin string, nodes []*lkserver.Server, env []string) []*bot {
	t.Helper()
	bots := make([]*bot, len(nodes))
	for i, n := range nodes {
		bots[i] = serveBot(ctx, t, bin, n, env)
	}
	return bots
}

// serveBot starts alicia serve on lk, stopped when the test ends.
func serveBot(ctx context.Context, t *testing.T, bin string, lk *lkserver.Server, env []string) *bot {
	t.Helper()
	b, err := startBot(ctx, bin, t.TempDir(), lk, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.stop)
	return b
}
