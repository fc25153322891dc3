package voice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"mime"
	"net/http"
	"strings"
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
	// SynthesizeError: Err is an *Error. Always last.
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

// OpenAISynthesizer speaks the OpenAI speech API, POST {URL}/audio/speech,
// as Kokoro-FastAPI, openedai-speech, speaches and OpenAI serve it. It asks
// for raw PCM (or WAV) and reads the body as it streams.
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
	// header: 24000 for OpenAI, Kokoro and openedai-speech (the default).
	PCMRate int
	Client  *http.Client
}

// chunkBytes is how much audio one event carries at most: 100 ms at
// 24 kHz, small enough to start playing early.
const chunkBytes = 4800

func ttsErr(kind ErrorKind, msg string, cause error) *Error {
	return &Error{Service: "tts", Kind: kind, Message: msg, cause: cause}
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
	b, _ := json.Marshal(body)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(o.URL, "/")+"/audio/speech", bytes.NewReader(b))
	if err != nil {
		return ttsErr(ErrConnect, err.Error(), err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := httpClient(o.Client).Do(hreq)
	if err != nil {
		return transportErr("tts", ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return httpErr("tts", resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" || mt == "text/event-stream" {
		return ttsErr(ErrProtocol, "expected audio, got "+mt, nil)
	}
	rate, channels := o.PCMRate, 1
	if rate == 0 {
		rate = 24000
	}
	var r io.Reader = resp.Body
	if format == "wav" {
		h, err := ReadWAVHeader(resp.Body)
		if err != nil {
			return ttsErr(ErrProtocol, "bad WAV header", err)
		}
		rate, channels = h.Rate, h.Channels
		if h.DataSize != 0 && h.DataSize != 0xFFFFFFFF {
			r = io.LimitReader(resp.Body, int64(h.DataSize))
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
