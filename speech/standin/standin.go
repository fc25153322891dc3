// Package standin is a local speech server that plays the STT and TTS
// servers Alicia supports, because no speech model can be downloaded on
// development and test machines. It answers in their exact wire formats so
// that Alicia's production clients are what the tests run:
//
//	POST /v1/audio/transcriptions            OpenAI: JSON, or typed SSE events with stream=true
//	POST /vllm/v1/audio/transcriptions       vLLM: chat-completion-like SSE chunks and [DONE]
//	POST /speaches/v1/audio/transcriptions   speaches: one JSON object per segment
//	POST /whispercpp/v1/audio/transcriptions whisper.cpp server: JSON only, never streams
//	POST /v1/audio/speech                    OpenAI, Kokoro-FastAPI, openedai-speech: pcm (24 kHz s16le) or wav, streamed;
//	                                         with stream_format "sse", OpenAI's speech.audio.delta/done events
//	GET  /v1/realtime?intent=transcription   OpenAI Realtime transcription over WebSocket (realtime.go);
//	                                         also /openai-beta/v1/realtime and /speaches/v1/realtime
//
// Recognition runs Debian's pocketsphinx with its US English model;
// synthesis runs espeak-ng. Open-vocabulary pocketsphinx is poor on
// synthetic speech, so the server can be given the phrases in play, which
// it turns into a JSGF grammar.
package standin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/speech"
)

// ModelDir is where Debian's pocketsphinx-en-us puts the model.
const ModelDir = "/usr/share/pocketsphinx/model/en-us"

// PCMRate is the rate of "pcm" responses, as OpenAI's API defines it.
const PCMRate = 24000

// Config configures the stand-in.
type Config struct {
	// Phrases, when given, are the only things the recogniser can hear
	// (a JSGF grammar of alternatives); empty means open vocabulary.
	Phrases []string
	// Rate is espeak-ng's speaking rate in words per minute at speed 1.
	// Default 140, which pocketsphinx recognises well.
	Rate int
	Log  *slog.Logger
}

// Server is the speech stand-in.
type Server struct {
	cfg     Config
	dir     string
	grammar string
	// dict is the pronouncing dictionary pocketsphinx loads on every
	// recognition: with a grammar, only its words. Loading the whole of
	// cmudict (135,000 words) took two thirds of each recognition's CPU,
	// and the voice benchmark's recogniser is most of the machine.
	dict string
}

// New checks that the engines are installed and prepares the grammar.
// Close removes its files.
func New(cfg Config) (*Server, error) {
	if cfg.Rate == 0 {
		cfg.Rate = 140
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	for _, bin := range []string{"pocketsphinx_continuous", "espeak-ng", "sox"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("speech stand-in needs %s (Debian packages pocketsphinx, pocketsphinx-en-us, espeak-ng, sox): %w", bin, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ModelDir, "en-us")); err != nil {
		return nil, fmt.Errorf("speech stand-in needs the pocketsphinx-en-us model: %w", err)
	}
	dir, err := os.MkdirTemp("", "alicia-speech-")
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, dir: dir, dict: filepath.Join(ModelDir, "cmudict-en-us.dict")}
	if len(cfg.Phrases) > 0 {
		s.grammar = filepath.Join(dir, "phrases.jsgf")
		err := os.WriteFile(s.grammar, []byte(JSGF(cfg.Phrases)), 0o600)
		if err == nil {
			err = s.narrowDict(cfg.Phrases)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return s, nil
}

// narrowDict writes the dictionary's entries for the phrases' words, all
// their pronunciations, as the one pocketsphinx loads. A word the
// dictionary lacks keeps the whole one, so that pocketsphinx says so as
// it would have.
func (s *Server) narrowDict(phrases []string) error {
	want := map[string]bool{}
	for _, p := range phrases {
		for _, w := range strings.Fields(Normalize(p)) {
			want[w] = false
		}
	}
	full, err := os.ReadFile(s.dict)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	for line := range strings.Lines(string(full)) {
		word, _, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(word, '('); i > 0 {
			word = word[:i] // an alternative pronunciation: word(2)
		}
		if _, ok := want[word]; ok {
			want[word] = true
			out.WriteString(line)
		}
	}
	for _, found := range want {
		if !found {
			return nil
		}
	}
	s.dict = filepath.Join(s.dir, "phrases.dict")
	return os.WriteFile(s.dict, out.Bytes(), 0o600)
}

// Close removes the server's files.
func (s *Server) Close() error { return os.RemoveAll(s.dir) }

var nonWord = regexp.MustCompile(`[^a-z' ]+`)

// Normalize lowercases text and keeps only words, as the recogniser
// writes them.
func Normalize(s string) string {
	return strings.Join(strings.Fields(nonWord.ReplaceAllString(strings.ToLower(s), " ")), " ")
}

// JSGF builds a grammar whose sentences are the phrases, alone or one
// after another.
func JSGF(phrases []string) string {
	var alts []string
	for _, p := range phrases {
		if n := Normalize(p); n != "" {
			alts = append(alts, n)
		}
	}
	return "#JSGF V1.0;\ngrammar phrases;\npublic <utterance> = <phrase>+;\n<phrase> = " + strings.Join(alts, " | ") + ";\n"
}

// Handler serves the endpoints listed in the package comment.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/audio/transcriptions", func(w http.ResponseWriter, r *http.Request) { s.transcribe(w, r, "openai") })
	mux.HandleFunc("POST /{profile}/v1/audio/transcriptions", func(w http.ResponseWriter, r *http.Request) {
		p := r.PathValue("profile")
		switch p {
		case "openai", "vllm", "speaches", "whispercpp":
			s.transcribe(w, r, p)
		default:
			apiError(w, http.StatusNotFound, "unknown profile "+p)
		}
	})
	mux.HandleFunc("POST /v1/audio/speech", s.speak)
	mux.HandleFunc("POST /{profile}/v1/audio/speech", s.speak)
	mux.HandleFunc("GET /v1/realtime", func(w http.ResponseWriter, r *http.Request) { s.realtime(w, r, "openai") })
	mux.HandleFunc("GET /{profile}/v1/realtime", func(w http.ResponseWriter, r *http.Request) {
		p := r.PathValue("profile")
		switch p {
		case "openai", "openai-beta", "speaches":
			s.realtime(w, r, p)
		default:
			apiError(w, http.StatusNotFound, "unknown realtime profile "+p)
		}
	})
	return mux
}

func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

func (s *Server) transcribe(w http.ResponseWriter, r *http.Request, profile string) {
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		apiError(w, http.StatusBadRequest, "expected multipart/form-data: "+err.Error())
		return
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		apiError(w, http.StatusBadRequest, "missing file")
		return
	}
	defer f.Close()
	samples, rate, err := speech.DecodeWAV(f)
	if err != nil {
		apiError(w, http.StatusBadRequest, "file is not a 16-bit PCM WAV: "+err.Error())
		return
	}
	if rf := r.FormValue("response_format"); rf != "" && rf != "json" && rf != "text" {
		apiError(w, http.StatusBadRequest, "response_format "+rf+" is not supported by the stand-in")
		return
	}
	stream := r.FormValue("stream") == "true" && profile != "whispercpp"
	in := filepath.Join(s.dir, fmt.Sprintf("in-%d.wav", time.Now().UnixNano()))
	defer os.Remove(in)
	if err := s.to16k(r.Context(), samples, rate, in); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var segs []string
	flusher, _ := w.(http.Flusher)
	started := false
	err = s.recognize(r.Context(), in, func(seg string) {
		segs = append(segs, seg)
		if !stream {
			return
		}
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			started = true
		}
		delta := seg
		if len(segs) > 1 {
			delta = " " + seg
		}
		switch profile {
		case "openai":
			writeEvent(w, "transcript.text.delta", map[string]any{"type": "transcript.text.delta", "delta": delta})
		case "vllm":
			writeEvent(w, "", map[string]any{"id": "trsc-standin", "object": "transcription.chunk", "created": time.Now().Unix(),
				"model": r.FormValue("model"), "choices": []any{map[string]any{"delta": map[string]any{"content": delta}, "finish_reason": nil}}})
		case "speaches":
			writeEvent(w, "", map[string]any{"text": seg})
		}
		if flusher != nil {
			flusher.Flush()
		}
	})
	if err != nil && !started {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	text := strings.Join(segs, " ")
	s.cfg.Log.Debug("speech stand-in recognised", "text", text, "seconds", float64(len(samples))/float64(rate))
	if !stream {
		if r.FormValue("response_format") == "text" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintln(w, text)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"text": text})
		return
	}
	if !started {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	switch profile {
	case "openai":
		writeEvent(w, "transcript.text.done", map[string]any{"type": "transcript.text.done", "text": text})
	case "vllm":
		writeEvent(w, "", map[string]any{"id": "trsc-standin", "object": "transcription.chunk", "created": time.Now().Unix(),
			"model": r.FormValue("model"), "choices": []any{map[string]any{"delta": map[string]any{"content": ""}, "finish_reason": "stop"}}})
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// recognize runs pocketsphinx on a 16 kHz WAV file; only failing to start
// it is an error. It calls seg with
// each stretch of speech as it is decoded: pocketsphinx prints one line
// per stretch, as it goes, and those are the segments a streaming server
// sends.
func (s *Server) recognize(ctx context.Context, path string, seg func(string)) error {
	args := []string{"-infile", path, "-hmm", filepath.Join(ModelDir, "en-us"), "-dict", s.dict, "-logfn", os.DevNull}
	if s.grammar != "" {
		// A wider word-exit beam than pocketsphinx's default (7e-29), which
		// is tuned for the speed of open-vocabulary decoding: a grammar of a
		// few phrases costs nothing more to search. At the default, a phrase
		// espeak-ng's default voice says only just clearly enough ("What is
		// the weather like in Paris today?") was now and then pruned at a
		// word boundary once a browser and Opus had carried it, and
		// nothing came back.
		args = append(args, "-jsgf", s.grammar, "-wbeam", "1e-40")
	} else {
		args = append(args, "-lm", filepath.Join(ModelDir, "en-us.lm.bin"))
	}
	cmd := exec.CommandContext(ctx, "pocketsphinx_continuous", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			seg(line)
		}
	}
	// pocketsphinx exits with an error when nothing matched the grammar,
	// which is an empty transcript, not a failure.
	_ = cmd.Wait()
	return nil
}

func writeEvent(w io.Writer, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
}

// to16k writes samples as the 16 kHz WAV pocketsphinx's model needs.
func (s *Server) to16k(ctx context.Context, samples []int16, rate int, path string) error {
	if rate == speech.RecognitionRate {
		return os.WriteFile(path, speech.EncodeWAV(samples, rate), 0o600)
	}
	// Repeatable (-R): sox dithers what it resamples from a random seed
	// unless told, and the same audio must always be recognised alike.
	cmd := exec.CommandContext(ctx, "sox", "-R", "-t", "wav", "-", "-r", "16000", "-c", "1", "-b", "16", path)
	cmd.Stdin = bytes.NewReader(speech.EncodeWAV(samples, rate))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sox: %v: %s", err, out)
	}
	return nil
}

type speechRequest struct {
	Model          string   `json:"model"`
	Input          string   `json:"input"`
	Voice          string   `json:"voice"`
	ResponseFormat string   `json:"response_format"`
	Speed          *float64 `json:"speed"`
	Stream         *bool    `json:"stream"`
	// StreamFormat "sse" asks for OpenAI's speech.audio.delta events
	// instead of a raw audio body.
	StreamFormat string `json:"stream_format"`
}

// espeakVoice maps OpenAI's voice names, which clients send by default,
// to espeak-ng's English voice; an espeak-ng voice name is used as is.
func espeakVoice(v string) string {
	switch v {
	case "", "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "af_heart", "af_bella", "af_sky":
		return "en-us"
	}
	if strings.ContainsAny(v, " /;") {
		return "en-us"
	}
	return v
}

func (s *Server) speak(w http.ResponseWriter, r *http.Request) {
	var req speechRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "body is not JSON: "+err.Error())
		return
	}
	if strings.TrimSpace(req.Input) == "" {
		apiError(w, http.StatusBadRequest, "input is empty")
		return
	}
	format := req.ResponseFormat
	if format == "" {
		format = "mp3"
	}
	var soxOut []string
	switch format {
	case "pcm":
		soxOut = []string{"-t", "raw", "-e", "signed-integer", "-L"}
	case "wav":
		soxOut = []string{"-t", "wav"}
	default:
		apiError(w, http.StatusBadRequest, "response_format "+format+" is not supported by the stand-in (pcm, wav)")
		return
	}
	sse := false
	switch req.StreamFormat {
	case "", "audio":
	case "sse":
		if format != "pcm" {
			apiError(w, http.StatusBadRequest, "stream_format sse is served with response_format pcm only by the stand-in")
			return
		}
		sse = true
	default:
		apiError(w, http.StatusBadRequest, "stream_format must be audio or sse, not "+req.StreamFormat)
		return
	}
	speed := 1.0
	if req.Speed != nil {
		if *req.Speed < 0.25 || *req.Speed > 4 {
			apiError(w, http.StatusBadRequest, "speed must be between 0.25 and 4")
			return
		}
		speed = *req.Speed
	}
	ctx := r.Context()
	espeak := exec.CommandContext(ctx, "espeak-ng", "-v", espeakVoice(req.Voice), "-s", strconv.Itoa(int(float64(s.cfg.Rate)*speed)), "--stdout")
	espeak.Stdin = strings.NewReader(req.Input)
	wav, err := espeak.StdoutPipe()
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// -D: no dither, so that the same text gives the same samples in
	// every shape and on every request.
	conv := exec.CommandContext(ctx, "sox", append(append([]string{"-V1", "-D", "-t", "wav", "-"}, soxOut...), "-r", strconv.Itoa(PCMRate), "-c", "1", "-b", "16", "-")...)
	conv.Stdin = wav
	out, err := conv.StdoutPipe()
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err := espeak.Start(); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer func() { _ = espeak.Wait() }()
	if err := conv.Start(); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer func() { _ = conv.Wait() }()
	switch {
	case sse:
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
	case format == "pcm":
		w.Header().Set("Content-Type", "audio/pcm")
	default:
		w.Header().Set("Content-Type", "audio/wav")
	}
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 4800)
	var odd []byte // an event carries whole samples
	for {
		n, err := out.Read(buf)
		chunk := buf[:n]
		if sse && n > 0 {
			chunk = append(odd, chunk...)
			whole := len(chunk) - len(chunk)%2
			odd = append([]byte(nil), chunk[whole:]...)
			chunk = chunk[:whole]
			if whole > 0 {
				chunk = []byte(sseEvent(map[string]any{"type": "speech.audio.delta", "audio": base64.StdEncoding.EncodeToString(chunk)}))
			}
		}
		if len(chunk) > 0 {
			if _, werr := w.Write(chunk); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.cfg.Log.Warn("speech stand-in: synthesis failed", "err", err)
				return
			}
			if sse {
				words := len(strings.Fields(req.Input))
				fmt.Fprint(w, sseEvent(map[string]any{"type": "speech.audio.done",
					"usage": map[string]any{"input_tokens": words, "output_tokens": 0, "total_tokens": words}}))
			}
			return
		}
	}
}

func sseEvent(v any) string {
	b, _ := json.Marshal(v)
	return "data: " + string(b) + "\n\n"
}
