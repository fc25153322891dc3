package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
)

func runServe(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	sc, err := parseServeConfig(args, stderr)
	if err != nil {
		return err
	}
	cfg := sc.Room
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if cfg.LiveKitURL == "" {
		// No LiveKit server given: run one for this process.
		dir, err := os.MkdirTemp("", "alicia-livekit-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		lk, err := lkserver.StartFresh(dir)
		if err != nil {
			return fmt.Errorf("no ALICIA_LIVEKIT_URL and no local livekit-server: %w", err)
		}
		defer lk.Stop()
		cfg.LiveKitURL, cfg.APIKey, cfg.APISecret = lk.URL, lk.APIKey, lk.APISecret
		log.Info("started a local livekit-server", "url", lk.URL)
	}

	var key []byte
	if sc.StoreReasoning == string(storage.ReasoningEncrypted) {
		key, _ = storage.ParseKey(sc.StorageKey) // validated
	}
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	store, err := storage.Open(ctx, storage.Config{DatabaseURL: sc.DatabaseURL, Reasoning: storage.ReasoningMode(sc.StoreReasoning), Key: key,
		Logger: log, Registerer: metrics})
	if err != nil {
		return err
	}

	llmCfg := sc.LLM
	if llmCfg.URL == "" {
		// No model configured: answer with the stand-in, and say so.
		url, stop, err := startStandin(log)
		if err != nil {
			return err
		}
		defer stop()
		llmCfg.Backend, llmCfg.URL, llmCfg.Model = "openai", url+"/vllm/v1", "Qwen3-8B"
		log.Warn("NO MODEL CONFIGURED: answering with the Qwen3 stand-in, which gives canned answers; set ALICIA_LLM_URL for a real model", "url", llmCfg.URL)
	}
	client, err := llm.New(llmCfg)
	if err != nil {
		return err
	}
	log.Info("model backend", "backend", llmCfg.Backend, "url", llmCfg.URL, "model", llmCfg.Model, "flavor", llm.FlavorOf(client))

	pcfg := pipeline.Config{LLM: client, System: sc.SystemPrompt, Thinking: sc.Thinking == "on", ReasoningDefault: reasoning.Mode(sc.ReasoningDefault), Logger: log}
	engine := pipeline.NewEngine(pcfg, store)
	agent := room.NewAgent(cfg, store, room.NewMetrics(metrics), func(id string) room.Conversation { return engine.Open(id) }, log)
	users := room.BearerIdentity(cfg.APIKey, cfg.APISecret)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/token", agent.TokenHandler())
	mux.Handle("GET /v1/conversations/{id}", storage.HistoryHandler(store, users, log))
	mux.Handle("/v1/preferences", engine.PreferenceHandler(users))
	mux.Handle("POST "+sc.AGUIPath, pipeline.NewAGUI(engine, users))
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	secret := cfg.TokenSecret
	if secret == "" {
		secret = cfg.APISecret
	}
	fmt.Fprintf(stdout, "Alicia serving: agent %q on %s, HTTP API on http://%s\n\n", cfg.AgentName, cfg.LiveKitURL, ln.Addr())
	fmt.Fprintf(stdout, "Talk to it from another terminal:\n\n    go run ./cmd/alicia chat -api http://%s -secret %s\n\n", ln.Addr(), secret)
	fmt.Fprintf(stdout, "or give a LiveKit client a token:\n\n    curl -X POST -H 'Authorization: Bearer %s' -d '{\"identity\": \"you\"}' http://%s/v1/token\n\n", secret, ln.Addr())

	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		agent.Run(ctx)
	}()
	<-ctx.Done()
	log.Info("stopping")
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	<-agentDone
	if err := <-httpDone; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return store.Close(shutdown)
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// startStandin serves the Qwen3 stand-in on a free local port.
func startStandin(log *slog.Logger) (string, func(), error) {
	base, srv, ln, err := standinServer("127.0.0.1:0", nil, standin.RealisticPacing, log)
	if err != nil {
		return "", nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	return base, func() { _ = srv.Close() }, nil
}
