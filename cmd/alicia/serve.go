package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/alicia-voice/alicia/internal/failover"
	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/telemetry"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/agui"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/speech"
	speechstandin "github.com/alicia-voice/alicia/speech/standin"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/web"
)

// runServe is the composition root: it assembles the store, the model,
// the engine, the LiveKit agent and, if on, its voice, then serves them
// until ctx ends. Each part that runs is stopped by a defer, so that on
// the way out none stops while a part started after it still uses it.
func runServe(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	sc, err := parseServeConfig(args, stderr)
	if err != nil {
		return err
	}
	tuneGC()
	cfg := sc.Room
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: sc.LogLevel}))
	room.RouteSDKLogs(log)
	if sc.DebugAddr != "" {
		stopDebug, err := serveDebug(sc.DebugAddr, log)
		if err != nil {
			return err
		}
		defer stopDebug()
	}
	if cfg.LiveKitURL == "" {
		stopLiveKit, err := startLocalLiveKit(&cfg, log)
		if err != nil {
			return err
		}
		defer stopLiveKit()
	}

	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	store, err := sc.openStore(ctx, log, metrics)
	if err != nil {
		return err
	}
	client, stopStandin, err := sc.modelClient(log)
	if err != nil {
		return err
	}
	defer stopStandin()
	servers := poolsOf(client)

	// Turns are traced when the standard OTLP endpoint variables are set;
	// what is still batched is flushed on the way out.
	tracing, stopTracing, err := telemetry.Tracing(ctx, log)
	if err != nil {
		return err
	}
	defer flushTraces(stopTracing, log)

	engine := pipeline.NewEngine(sc.pipelineConfig(client, telemetry.NewTurns(metrics, tracing), log), store)
	agent := room.NewAgent(cfg, store, room.NewMetrics(metrics), func(id string) room.Conversation { return engine.Open(id) }, log)
	if sc.Voice == "on" {
		voiceServers, stopVoice, err := sc.enableVoice(agent, log)
		if err != nil {
			return err
		}
		defer stopVoice()
		servers = append(servers, voiceServers...)
	}
	s := service{cfg: cfg, agent: agent, engine: engine, store: store, metrics: metrics, servers: servers, log: log}
	return s.serve(ctx, s.routes(sc.AGUIPath), stdout)
}

// tuneGC makes collections rarer than Go's default, unless GOGC is set:
// the heap may grow to 2.5 times its live size instead of 2. In the
// voice bench a conversation with a speakerphone then kept under 4 MB
// (3.4, against 2.9 at Go's 100 and 4.1 at 200), while its speakerphones,
// starved on 2 cores, leaked echo at 100 more often than at 150 or 200
// (docs/operations.md).
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(150)
	}
}

// startLocalLiveKit runs a livekit-server for this process, for when no
// LiveKit server is given, and points cfg at it. stop ends the server and
// then removes its files.
func startLocalLiveKit(cfg *room.Config, log *slog.Logger) (stop func(), err error) {
	dir, err := os.MkdirTemp("", "alicia-livekit-")
	if err != nil {
		return nil, err
	}
	lk, err := lkserver.StartFresh(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("no ALICIA_LIVEKIT_URL and no local livekit-server: %w", err)
	}
	cfg.LiveKitURL, cfg.APIKey, cfg.APISecret = lk.URL, lk.APIKey, lk.APISecret
	log.Info("started a local livekit-server", "url", lk.URL)
	return func() {
		lk.Stop()
		os.RemoveAll(dir)
	}, nil
}

// openStore opens the conversation store: Postgres, or memory when no
// database is given.
func (c *serveConfig) openStore(ctx context.Context, log *slog.Logger, metrics prometheus.Registerer) (storage.Store, error) {
	var key []byte
	if c.StoreReasoning == string(storage.ReasoningEncrypted) {
		key, _ = storage.ParseKey(c.StorageKey) // validated
	}
	return storage.Open(ctx, storage.Config{DatabaseURL: c.DatabaseURL, Reasoning: storage.ReasoningMode(c.StoreReasoning), Key: key,
		BatchWindow: c.batchWindow(), Logger: log, Registerer: metrics})
}

// modelClient is the client of the configured model, or of the Qwen3
// stand-in served for this process when none is; stop ends the stand-in.
func (c *serveConfig) modelClient(log *slog.Logger) (client llm.Client, stop func(), err error) {
	llmCfg := c.LLM
	llmCfg.Logger = log
	stop = func() {}
	if llmCfg.URL == "" {
		// No model configured: answer with the stand-in, and say so.
		url, stopStandin, err := startStandin(log)
		if err != nil {
			return nil, nil, err
		}
		stop = stopStandin
		llmCfg.Backend, llmCfg.URL, llmCfg.Model = "openai", url+"/vllm/v1", "Qwen3-8B"
		log.Warn("NO MODEL CONFIGURED: answering with the Qwen3 stand-in, which gives canned answers; set ALICIA_LLM_URL for a real model", "url", llmCfg.URL)
	}
	client, err = llm.New(llmCfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	log.Info("model backend", "backend", llmCfg.Backend, "url", llmCfg.URL, "model", llmCfg.Model, "flavor", llm.FlavorOf(client))
	return client, stop, nil
}

// flushTraces sends what the tracer still holds, giving up after a few
// seconds so that a collector gone away does not hold up the exit.
func flushTraces(stopTracing func(context.Context) error, log *slog.Logger) {
	flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stopTracing(flush); err != nil {
		log.Warn("flushing traces", "err", err)
	}
}

// enableVoice lets the agent listen and speak: the speech providers come
// from voiceConfig, the turn-taking from the settings. It returns the
// providers' server pools, which /readyz reports, and stop, which ends a
// speech stand-in.
func (c *serveConfig) enableVoice(agent *room.Agent, log *slog.Logger) (servers []*failover.Pool, stop func(), err error) {
	vcfg, stop, err := voiceConfig(c.Speech, c.SpeechStandinPhrases, log)
	if err != nil {
		return nil, nil, err
	}
	timing := c.Stage
	timing.Recognizer, timing.Synthesizer, timing.Language, timing.Voice, timing.Logger = vcfg.Stage.Recognizer, vcfg.Stage.Synthesizer, vcfg.Stage.Language, vcfg.Stage.Voice, vcfg.Stage.Logger
	vcfg.Stage = timing
	agent.EnableVoice(vcfg)
	return poolsOf(vcfg.Stage.Recognizer, vcfg.Stage.Synthesizer), stop, nil
}

// service is the assembled server: the parts its HTTP routes expose and
// its shutdown waits for.
type service struct {
	cfg     room.Config
	agent   *room.Agent
	engine  *pipeline.Engine
	store   storage.Store
	metrics *prometheus.Registry
	servers []*failover.Pool
	log     *slog.Logger
}

// routes is the HTTP API, the web client, and the endpoints operators and
// LiveKit call.
func (s service) routes(aguiPath string) http.Handler {
	users := room.BearerIdentity(s.cfg.APIKey, s.cfg.APISecret)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/token", s.agent.TokenHandler())
	mux.Handle("GET /v1/conversations/{id}", storage.HistoryHandler(s.store, users, s.engine.Preference, s.log))
	prefs := storage.PreferenceHandler(s.store, users, s.engine.Preference, s.engine.ReasoningDefault())
	mux.Handle("GET /v1/preferences", prefs)
	mux.Handle("PUT /v1/preferences", prefs)
	mux.Handle("POST "+aguiPath, agui.New(s.engine, s.store, users))
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{}))
	mux.Handle("GET /", web.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("GET /readyz", readiness{agent: s.agent, store: s.store, servers: s.servers})
	mux.Handle("POST /v1/livekit/webhook", s.agent.WebhookHandler())
	return mux
}

// serve serves handler on the HTTP address and runs the agent until ctx
// ends; then it stops both, waits for them, and closes the store, whose
// writer may still hold the last turns.
func (s service) serve(ctx context.Context, handler http.Handler, stdout io.Writer) error {
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		s.agent.Run(ctx)
	}()
	// The link goes out once LiveKit can dispatch the bot: a browser opened
	// at once would otherwise join a room nobody answers.
	select {
	case <-s.agent.Registered():
	case <-ctx.Done():
	}
	announce(stdout, s.cfg, ln.Addr())

	<-ctx.Done()
	s.log.Info("stopping")
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	<-agentDone
	if err := <-httpDone; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return s.store.Close(shutdown)
}

// announce prints how to reach the server: the web client's link, the
// chat command and a token request, each with the access key.
func announce(stdout io.Writer, cfg room.Config, addr net.Addr) {
	secret := cfg.TokenSecret
	if secret == "" {
		secret = cfg.APISecret
	}
	fmt.Fprintf(stdout, "Alicia serving: agent %q on %s, HTTP API on http://%s\n\n", cfg.AgentName, cfg.LiveKitURL, addr)
	// The access key travels in the link's fragment, which browsers never
	// send to a server; the page keeps it and clears the address bar.
	fmt.Fprintf(stdout, "Open the web client in a browser:\n\n    http://%s/#key=%s\n\n", addr, url.QueryEscape(secret))
	fmt.Fprintf(stdout, "Talk to it from another terminal:\n\n    go run ./cmd/alicia chat -api http://%s -secret %s\n\n", addr, secret)
	fmt.Fprintf(stdout, "or give a LiveKit client a token:\n\n    curl -X POST -H 'Authorization: Bearer %s' -d '{\"identity\": \"you\"}' http://%s/v1/token\n\n", secret, addr)
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// voiceConfig reads the speech providers' configuration; where no STT or
// TTS server is given it serves the speech stand-in on a free local port,
// and says so.
func voiceConfig(pc speech.ProviderConfig, phrases string, log *slog.Logger) (room.VoiceConfig, func(), error) {
	stop := func() {}
	pc.Logger = log
	if pc.STTURL == "" || pc.TTSURL == "" {
		sp, err := newSpeechStandin(phrases, log)
		if err != nil {
			return room.VoiceConfig{}, nil, fmt.Errorf("no ALICIA_STT_URL or ALICIA_TTS_URL and no speech stand-in (ALICIA_VOICE=off runs without voice): %w", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			sp.Close()
			return room.VoiceConfig{}, nil, err
		}
		srv := &http.Server{Handler: sp.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		stop = func() { _ = srv.Close(); _ = sp.Close() }
		base := "http://" + ln.Addr().String() + "/v1"
		// The stand-in is spoken to over the realtime transcription
		// WebSocket and streams synthesis as SSE events, so that a start
		// without speech servers runs the streaming clients production
		// servers get.
		if pc.STTURL == "" {
			pc.STTURL, pc.STTStream, pc.STTTransport = base, true, "realtime"
			log.Warn("NO SPEECH RECOGNITION CONFIGURED: listening with the pocketsphinx stand-in, which is poor on open vocabulary; set ALICIA_STT_URL for a real STT server", "url", base, "phrases", phrases)
		}
		if pc.TTSURL == "" {
			pc.TTSURL, pc.TTSFormat, pc.TTSRate, pc.TTSStreamFormat = base, "pcm", speechstandin.PCMRate, "sse"
			log.Warn("NO SPEECH SYNTHESIS CONFIGURED: speaking with the espeak-ng stand-in; set ALICIA_TTS_URL for a real TTS server", "url", base)
		}
	}
	log.Info("voice", "stt", pc.STTURL, "stt_transport", pc.STTTransport, "tts", pc.TTSURL, "tts_stream_format", pc.TTSStreamFormat)
	return room.VoiceConfig{Stage: voice.Config{Recognizer: pc.Recognizer(), Synthesizer: pc.Synthesizer(), Language: pc.Language,
		Voice: pc.TTSVoice, Logger: log}, OutputRate: pc.TTSRate}, stop, nil
}

// startStandin serves the Qwen3 stand-in on a free local port.
func startStandin(log *slog.Logger) (string, func(), error) {
	base, srv, ln, err := standinServer("127.0.0.1:0", nil, standin.RealisticPacing, nil, log, nil)
	if err != nil {
		return "", nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	return base, func() { _ = srv.Close() }, nil
}
