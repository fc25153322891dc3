package speech

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"mime"
	"net/http"
	"strings"

	"github.com/alicia-voice/alicia/internal/failover"
	"github.com/alicia-voice/alicia/internal/provider"
)

// SynthesizeRequest is one piece of text to speak.
type SynthesizeRequest struct {
	Text  string
	Voice string
	// Speed is the speaking rate; 0 means the server's default (1.0).
	Speed float64
}

// SynthesizeEventKind tells what a SynthesizeEvent carries.
type SynthesizeEventKind uint8

const (
	// SynthesizeAudio: Samples holds mono 16-bit PCM at SampleRate.
	SynthesizeAudio SynthesizeEventKind = iota + 1
	// SynthesizeDone: the text is fully spoken. Always last.
	SynthesizeDone
	// SynthesizeError: Err is a *provider.Error. Always last.
	SynthesizeError
)

// SynthesizeEvent is one item of a synthesis stream.
type SynthesizeEvent struct {
	Kind       SynthesizeEventKind
	Samples    []int16
	SampleRate int
	Err        error
}

// Synthesizer turns text into speech.
type Synthesizer interface {
	// Stream speaks req, yielding audio as the server produces it. The
	// sequence ends with one SynthesizeDone or SynthesizeError.
	Stream(ctx context.Context, req *SynthesizeRequest) iter.Seq[SynthesizeEvent]
}

// DefaultPCMRate is the sample rate of headerless "pcm" speech from
// OpenAI, Kokoro and openedai-speech.
const DefaultPCMRate = 24000

// OpenAISynthesizer speaks the OpenAI speech API, POST {URL}/audio/speech,
// as Kokoro-FastAPI, openedai-speech, speaches and OpenAI serve it. It asks
// for raw PCM (or WAV) and yields each piece of audio as it arrives, in
// either of the streamed shapes: a chunked audio body, or server-sent
// speech.audio.delta events. It goes by the response's Content-Type, not
// by what it asked for, because servers that do not know stream_format
// ignore it and send audio.
type OpenAISynthesizer struct {
	// URL is the base URL including /v1.
	URL    string
	Model  string
	Voice  string
	APIKey string
	// Format is "pcm" (default) or "wav". OpenAI-compatible servers send
	// pcm as headerless 16-bit little-endian mono.
	Format string
	// PCMRate is the sample rate of "pcm" responses, which carry no
	// header; 0 means DefaultPCMRate.
	PCMRate int
	// StreamFormat "sse" asks for OpenAI's server-sent events
	// (stream_format: sse); "" or "audio" for a chunked audio body.
	StreamFormat string
	Client       *http.Client

	servers servers
}

// Servers is the pool the synthesiser serves from: ProviderConfig's
// servers, or URL alone.
func (o *OpenAISynthesizer) Servers() *failover.Pool { return o.servers.get("tts", o.URL, nil) }

// chunkBytes is how much audio one event carries at most: 100 ms at
// 24 kHz, small enough to start playing early.
const chunkBytes = 4800

func ttsErr(kind provider.ErrorKind, msg string, cause error) *provider.Error {
	return &provider.Error{Service: "tts", Kind: kind, Message: msg, Cause: cause}
}

// Stream implements Synthesizer.
func (o *OpenAISynthesizer) Stream(ctx context.Context, req *SynthesizeRequest) iter.Seq[SynthesizeEvent] {
	return func(yield func(SynthesizeEvent) bool) {
		err := o.run(ctx, req, func(s []int16, rate int) bool {
			return yield(SynthesizeEvent{Kind: SynthesizeAudio, Samples: s, SampleRate: rate})
		})
		switch {
		case errors.Is(err, errStopped):
		case err != nil:
			yield(SynthesizeEvent{Kind: SynthesizeError, Err: err})
		default:
			yield(SynthesizeEvent{Kind: SynthesizeDone})
		}
	}
}

func (o *OpenAISynthesizer) run(ctx context.Context, req *SynthesizeRequest, emit func([]int16, int) bool) error {
	format := o.Format
	if format == "" {
		format = "pcm"
	}
	voice := req.Voice
	if voice == "" {
		voice = o.Voice
	}
	body := map[string]any{"model": o.Model, "input": req.Text, "voice": voice, "response_format": format, "stream": true}
	if req.Speed != 0 {
		body["speed"] = req.Speed
	}
	if o.StreamFormat == "sse" {
		body["stream_format"] = "sse"
	}
	b, _ := json.Marshal(body)
	return o.Servers().Do(ctx, func(ctx context.Context, a failover.Attempt) error {
		return o.runOn(ctx, a, b, format, emit)
	})
}

// runOn asks one server. Failures before the first byte of its answer
// are Down, so that the next server may be asked; once audio came, what
// goes wrong is the sentence's (another server would repeat its start).
func (o *OpenAISynthesizer) runOn(ctx context.Context, a failover.Attempt, payload []byte, format string, emit func([]int16, int) bool) error {
	fctx, fb := failover.Watch(ctx, a)
	defer fb.Release()
	hreq, err := http.NewRequestWithContext(fctx, http.MethodPost, strings.TrimSuffix(a.Server, "/")+"/audio/speech", bytes.NewReader(payload))
	if err != nil {
		return ttsErr(provider.ErrConnect, err.Error(), err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := httpClient(o.Client).Do(hreq)
	if err != nil {
		return beforeFirstByte(ctx, fctx, "tts", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusErr(httpErr("tts", resp))
	}
	first, err := openBody(ctx, fctx, fb, "tts", resp.Body)
	if err != nil {
		return err
	}
	rate, channels := o.PCMRate, 1
	if rate == 0 {
		rate = DefaultPCMRate
	}
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
	case "text/event-stream":
		return readSpeechSSE(ctx, first, rate, emit)
	case "application/json":
		return ttsErr(provider.ErrProtocol, "expected audio, got "+mt, nil)
	}
	var r io.Reader = first
	if format == "wav" {
		h, err := ReadWAVHeader(first)
		if err != nil {
			return ttsErr(provider.ErrProtocol, "bad WAV header", err)
		}
		rate, channels = h.Rate, h.Channels
		if h.DataSize != 0 && h.DataSize != 0xFFFFFFFF {
			r = io.LimitReader(first, int64(h.DataSize))
		}
	}
	buf := make([]byte, chunkBytes)
	var odd []byte
	for {
		n, err := r.Read(buf)
		if n > 0 {
			data := append(odd, buf[:n]...)
			whole := len(data) - len(data)%(2*channels)
			odd = append([]byte(nil), data[whole:]...)
			if whole > 0 && !emit(toMono(bytesToPCM(data[:whole]), channels), rate) {
				return errStopped
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return transportErr("tts", ctx, err)
		}
	}
}

// readSpeechSSE reads OpenAI's streamed speech: speech.audio.delta events
// of base64 PCM, then speech.audio.done. Each delta is played as it comes.
func readSpeechSSE(ctx context.Context, r io.Reader, rate int, emit func([]int16, int) bool) error {
	sc := bufio.NewScanner(r)
	// A delta of a whole sentence's audio in one event is allowed.
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var odd []byte
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			return nil
		}
		var ev struct {
			Type  string          `json:"type"`
			Audio string          `json:"audio"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return ttsErr(provider.ErrProtocol, "unreadable event: "+truncate(data, 200), err)
		}
		switch {
		case ev.Type == "error" || (len(ev.Error) > 0 && string(ev.Error) != "null"):
			return provider.StreamError("tts", []byte(data))
		case ev.Type == "speech.audio.done":
			return nil
		case ev.Type == "speech.audio.delta":
			b, err := base64.StdEncoding.DecodeString(ev.Audio)
			if err != nil {
				return ttsErr(provider.ErrProtocol, "a delta's audio is not base64", err)
			}
			b = append(odd, b...)
			whole := len(b) - len(b)%2
			odd = append([]byte(nil), b[whole:]...)
			if whole > 0 && !emit(bytesToPCM(b[:whole]), rate) {
				return errStopped
			}
		}
	}
	if err := sc.Err(); err != nil {
		return transportErr("tts", ctx, err)
	}
	return ttsErr(provider.ErrTruncated, "the event stream ended without speech.audio.done", nil)
}
