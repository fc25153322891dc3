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
	"sort"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/llm/standin"
	speechstandin "github.com/alicia-voice/alicia/speech/standin"
)

func runStandin(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("standin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "address to listen on")
	dir := fs.String("scenarios", "", "a folder of scenario files (*.json); the default scenario answers anything")
	ttft := fs.Duration("ttft", time.Duration(standin.RealisticPacing.TTFTMs*float64(time.Millisecond)), "time to the first token")
	perToken := fs.Duration("token", time.Duration(standin.RealisticPacing.TokenMs*float64(time.Millisecond)), "time per token")
	aliases := map[string]string{}
	fs.Func("alias", "serve a model name as some weights, as vLLM's --served-model-name does: -alias assistant=Qwen/Qwen3-4B-Thinking-2507 (repeatable)", func(v string) error {
		name, weights, ok := strings.Cut(v, "=")
		if !ok || name == "" || weights == "" {
			return errors.New("want name=weights")
		}
		aliases[name] = weights
		return nil
	})
	phrases := fs.String("phrases", "", "a file of phrases, one a line, that the speech recogniser is limited to (open vocabulary otherwise)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var scenarios []standin.Scenario
	if *dir != "" {
		var err error
		if scenarios, err = standin.LoadScenarios(*dir); err != nil {
			return err
		}
	}
	pacing := standin.Pacing{TTFTMs: float64(*ttft) / float64(time.Millisecond), TokenMs: float64(*perToken) / float64(time.Millisecond), Jitter: standin.RealisticPacing.Jitter}
	speech, err := newSpeechStandin(*phrases, log)
	if err != nil {
		log.Warn("no speech stand-in: the audio endpoints are not served", "err", err)
	} else {
		defer speech.Close()
	}
	base, srv, ln, err := standinServer(*addr, scenarios, pacing, speech, log, aliases)
	if err != nil {
		return err
	}
	log.Warn("STAND-IN MODEL: this is not a real Qwen3; answers are canned scenarios", "url", base, "scenarios", len(scenarios)+1)
	fmt.Fprintf(stdout, "Qwen3 stand-in listening on %s\n", base)
	examples := map[string]string{
		"vLLM (ALICIA_LLM_BACKEND=openai)":    base + "/vllm/v1",
		"SGLang":                              base + "/sglang/v1",
		"llama.cpp":                           base + "/llamacpp/v1",
		"Ollama /v1":                          base + "/ollama/v1",
		"Ollama native (backend ollama)":      base,
		"DashScope":                           base + "/dashscope/v1",
		"OpenRouter":                          base + "/openrouter/v1",
		"AG-UI agent (backend agui)":          base + "/agui",
		"vLLM without a reasoning parser":     base + "/vllm-noparser/v1",
		"vLLM with chunks cut anywhere (MTP)": base + "/vllm-mtp/v1",
	}
	names := make([]string, 0, len(examples))
	for k := range examples {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(stdout, "  %-38s ALICIA_LLM_URL=%s\n", k, examples[k])
	}
	if speech != nil {
		log.Warn("STAND-IN SPEECH: pocketsphinx and espeak-ng, not a real STT or TTS model", "phrases", *phrases)
		fmt.Fprintf(stdout, "  %-38s ALICIA_STT_URL=%s/v1 ALICIA_TTS_URL=%s/v1\n", "speech (OpenAI audio API)", base, base)
		fmt.Fprintf(stdout, "  %-38s ALICIA_STT_URL=%s/vllm/v1 (also /speaches/v1, /whispercpp/v1)\n", "speech recognition as vLLM serves it", base)
		fmt.Fprintf(stdout, "  %-38s ALICIA_STT_URL=%s/v1 ALICIA_STT_TRANSPORT=realtime (also /openai-beta/v1, /speaches/v1)\n", "realtime transcription (WebSocket)", base)
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// standinServer builds the stand-in's HTTP server on addr (port 0 for a
// free one) and returns its base URL; the caller serves ln. speech, if
// not nil, serves the audio endpoints beside the model's; aliases serve a
// model name as other weights.
func standinServer(addr string, scenarios []standin.Scenario, pacing standin.Pacing, speech *speechstandin.Server, log *slog.Logger, aliases map[string]string) (string, *http.Server, net.Listener, error) {
	s, err := standin.New(scenarios, pacing, log)
	if err != nil {
		return "", nil, nil, err
	}
	for name, weights := range aliases {
		s.Serve(name, weights)
	}
	handler := s.Handler()
	if speech != nil {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.Handle("/v1/audio/", speech.Handler())
		mux.Handle("/{profile}/v1/audio/", speech.Handler())
		mux.Handle("/v1/realtime", speech.Handler())
		mux.Handle("/{profile}/v1/realtime", speech.Handler())
		handler = mux
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, nil, err
	}
	return "http://" + ln.Addr().String(), &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}, ln, nil
}

// newSpeechStandin builds the speech stand-in, limited to the phrases in
// the file at path if one is given.
func newSpeechStandin(path string, log *slog.Logger) (*speechstandin.Server, error) {
	var phrases []string
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				phrases = append(phrases, l)
			}
		}
	}
	return speechstandin.New(speechstandin.Config{Phrases: phrases, Log: log})
}
