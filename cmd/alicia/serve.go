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
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
)

func runServe(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg room.Config
	cfg.Flags(fs)
	dbURL := fs.String("database", os.Getenv("ALICIA_DATABASE_URL"), "Postgres URL; empty keeps conversations in memory (ALICIA_DATABASE_URL)")
	reasoningMode := fs.String("store-reasoning", envOr("ALICIA_STORE_REASONING", "plain"), "plain, encrypted (key in ALICIA_STORAGE_KEY) or off (ALICIA_STORE_REASONING)")
	system := fs.String("system", envOr("ALICIA_SYSTEM_PROMPT", "You are Alicia, a helpful voice assistant. Answer briefly."), "system prompt (ALICIA_SYSTEM_PROMPT)")
	aguiPath := fs.String("agui-path", envOr("ALICIA_AGUI_PATH", "/agui"), "path of the AG-UI endpoint (ALICIA_AGUI_PATH)")
	thinking := fs.Bool("thinking", os.Getenv("ALICIA_THINKING") != "off", "let the model reason before answering (ALICIA_THINKING=off disables)")
	debugAddr := fs.String("debug-addr", os.Getenv("ALICIA_DEBUG_ADDR"), "serve /debug/pprof on this address; keep it private (ALICIA_DEBUG_ADDR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	quietSDK(log)
	if *debugAddr != "" {
		stopDebug, err := serveDebug(*debugAddr, log)
		if err != nil {
			return err
		}
		defer stopDebug()
	}
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
	if *reasoningMode == string(storage.ReasoningEncrypted) {
		var err error
		if key, err = storage.ParseKey(os.Getenv("ALICIA_STORAGE_KEY")); err != nil {
			return err
		}
	}
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	store, err := storage.Open(ctx, storage.Config{DatabaseURL: *dbURL, Reasoning: storage.ReasoningMode(*reasoningMode), Key: key,
		Logger: log, Registerer: metrics})
	if err != nil {
		return err
	}

	llmCfg, err := llm.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
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

	pcfg := pipeline.Config{LLM: client, System: *system, Thinking: *thinking, Logger: log}
	agent := room.NewAgent(cfg, store, room.NewMetrics(metrics), pipeline.New(pcfg), log)
	users := room.BearerIdentity(cfg.APIKey, cfg.APISecret)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/token", agent.TokenHandler())
	mux.Handle("GET /v1/conversations/{id}", storage.HistoryHandler(store, users, log))
	mux.Handle("POST "+*aguiPath, pipeline.NewAGUI(pcfg, store, users))
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("GET /readyz", readiness{agent: agent, store: store})
	mux.Handle("POST /v1/livekit/webhook", agent.WebhookHandler())
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
