package speech

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/internal/failover"
	"github.com/alicia-voice/alicia/internal/provider"
)

// RecognizeRequest is one utterance to recognise.
type RecognizeRequest struct {
	// Audio is mono 16-bit PCM at SampleRate.
	Audio      []int16
	SampleRate int
	// Language is an ISO-639-1 hint; empty lets the server detect it.
	Language string
	// Prompt is text that came before, to help the recogniser.
	Prompt string
}

// RecognizeEventKind tells what a RecognizeEvent carries.
type RecognizeEventKind uint8

const (
	// RecognizePartial: Text is the transcript so far; it may still change.
	RecognizePartial RecognizeEventKind = iota + 1
	// RecognizeFinal: Text is the whole transcript. Always last.
	RecognizeFinal
	// RecognizeError: Err is a *provider.Error. Always last.
	RecognizeError
)

// RecognizeEvent is one item of a recognition stream.
type RecognizeEvent struct {
	Kind RecognizeEventKind
	Text string
	Err  error
}

// Recognizer turns an utterance into text.
type Recognizer interface {
	// Stream recognises req. The sequence ends with one RecognizeFinal or
	// RecognizeError; breaking out early or cancelling ctx stops the
	// request.
	Stream(ctx context.Context, req *RecognizeRequest) iter.Seq[RecognizeEvent]
}

// OpenAIRecognizer speaks the OpenAI transcription API,
// POST {URL}/audio/transcriptions, as speaches (faster-whisper-server),
// whisper.cpp's server, vLLM and OpenAI serve it.
type OpenAIRecognizer struct {
	// URL is the base URL including /v1.
	URL    string
	Model  string
	APIKey string
	// Stream asks for server-sent partial transcripts (stream=true). A
	// server that does not stream answers with plain JSON, which is read
	// as well.
	Streaming bool
	Client    *http.Client

	servers servers
}

// Servers is the pool the recogniser serves from: ProviderConfig's
// servers, or URL alone.
func (o *OpenAIRecognizer) Servers() *failover.Pool { return o.servers.get("stt", o.URL, nil) }

func sttErr(kind provider.ErrorKind, msg string, cause error) *provider.Error {
	return &provider.Error{Service: "stt", Kind: kind, Message: msg, Cause: cause}
}

// Stream implements Recognizer.
func (o *OpenAIRecognizer) Stream(ctx context.Context, req *RecognizeRequest) iter.Seq[RecognizeEvent] {
	return func(yield func(RecognizeEvent) bool) {
		text, err := o.run(ctx, req, func(partial string) bool {
			return yield(RecognizeEvent{Kind: RecognizePartial, Text: partial})
		})
		switch {
		case errors.Is(err, errStopped):
		case err != nil:
			yield(RecognizeEvent{Kind: RecognizeError, Err: err})
		default:
			yield(RecognizeEvent{Kind: RecognizeFinal, Text: strings.TrimSpace(text)})
		}
	}
}

var errStopped = errors.New("consumer stopped")

func (o *OpenAIRecognizer) run(ctx context.Context, req *RecognizeRequest, partial func(string) bool) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", "speech.wav")
	if err != nil {
		return "", err
	}
	if _, err := fw.Write(EncodeWAV(req.Audio, req.SampleRate)); err != nil {
		return "", err
	}
	fields := [][2]string{{"model", o.Model}, {"response_format", "json"}, {"language", req.Language}, {"prompt", req.Prompt}}
	if o.Streaming {
		fields = append(fields, [2]string{"stream", "true"})
	}
	for _, f := range fields {
		if f[1] == "" {
			continue
		}
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return "", err
		}
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	payload, ctype := body.Bytes(), mw.FormDataContentType()
	audio := audioLength(req)
	var text string
	err = o.Servers().Do(ctx, func(ctx context.Context, a failover.Attempt) error {
		var err error
		a.FirstByte = uploadFirstByte(a.FirstByte, audio)
		text, err = o.runOn(ctx, a, payload, ctype, partial)
		return err
	})
	return text, err
}

// audioLength is how long req's audio plays.
func audioLength(req *RecognizeRequest) time.Duration {
	if req.SampleRate <= 0 {
		return 0
	}
	return time.Duration(len(req.Audio)) * time.Second / time.Duration(req.SampleRate)
}

// uploadFirstByte is the first-byte limit of an upload of audio long:
// a recogniser answers an upload, even a streamed one, once it has
// transcribed it (or its first segment), which on a CPU takes up to about
// as long as the audio, so a healthy server with a long utterance would
// miss the bare limit and be set aside. 0 (no limit) stays 0.
func uploadFirstByte(limit, audio time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	return limit + audio
}

// runOn asks one server. Failures before the first byte of its answer
// are Down, so that the next server may be asked.
func (o *OpenAIRecognizer) runOn(ctx context.Context, a failover.Attempt, payload []byte, ctype string, partial func(string) bool) (string, error) {
	fctx, fb := failover.Watch(ctx, a)
	defer fb.Release()
	hreq, err := http.NewRequestWithContext(fctx, http.MethodPost, strings.TrimSuffix(a.Server, "/")+"/audio/transcriptions", bytes.NewReader(payload))
	if err != nil {
		return "", sttErr(provider.ErrConnect, err.Error(), err)
	}
	hreq.Header.Set("Content-Type", ctype)
	hreq.Header.Set("Accept", "application/json, text/event-stream")
	if o.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := httpClient(o.Client).Do(hreq)
	if err != nil {
		return "", beforeFirstByte(ctx, fctx, "stt", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", statusErr(httpErr("stt", resp))
	}
	body, err := openBody(ctx, fctx, fb, "stt", resp.Body)
	if err != nil {
		return "", err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
		return readTranscriptSSE(ctx, body, partial)
	case "text/plain":
		b, err := io.ReadAll(body)
		if err != nil {
			return "", transportErr("stt", ctx, err)
		}
		return string(b), nil
	}
	var out struct {
		Text *string `json:"text"`
	}
	if err := json.NewDecoder(body).Decode(&out); err != nil || out.Text == nil {
		if ctx.Err() != nil {
			return "", transportErr("stt", ctx, ctx.Err())
		}
		return "", sttErr(provider.ErrProtocol, "no text in the JSON response", err)
	}
	return *out.Text, nil
}

// readTranscriptSSE reads the three streamed shapes in use: OpenAI's
// typed events (transcript.text.delta, then transcript.text.done with the
// whole text), vLLM's chat-completion-like chunks (choices[].delta.content,
// then [DONE]), and speaches' one JSON object per recognised segment
// ({"text": …}).
func readTranscriptSSE(ctx context.Context, r io.Reader, partial func(string) bool) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var text strings.Builder
	sawAny := false
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			return text.String(), nil
		}
		var ev struct {
			Type    string `json:"type"`
			Delta   string `json:"delta"`
			Text    string `json:"text"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return "", sttErr(provider.ErrProtocol, "unreadable event: "+data, err)
		}
		sawAny = true
		switch {
		case len(ev.Error) > 0 && string(ev.Error) != "null":
			return "", provider.StreamError("stt", []byte(data))
		case ev.Type == "transcript.text.done":
			return ev.Text, nil
		case ev.Type == "transcript.text.delta":
			text.WriteString(ev.Delta)
		case len(ev.Choices) > 0:
			for _, c := range ev.Choices {
				text.WriteString(c.Delta.Content)
			}
		case ev.Text != "":
			if text.Len() > 0 && !strings.HasPrefix(ev.Text, " ") {
				text.WriteByte(' ')
			}
			text.WriteString(ev.Text)
		default:
			continue
		}
		if !partial(strings.TrimSpace(text.String())) {
			return "", errStopped
		}
	}
	if err := sc.Err(); err != nil {
		return "", transportErr("stt", ctx, err)
	}
	if !sawAny {
		return "", sttErr(provider.ErrTruncated, "the event stream ended with no event", nil)
	}
	// speaches ends its segment stream without a terminator.
	return text.String(), nil
}

func httpClient(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return http.DefaultClient
}

func transportErr(service string, ctx context.Context, err error) *provider.Error {
	if ctx.Err() != nil {
		return &provider.Error{Service: service, Kind: provider.ErrCancelled, Cause: ctx.Err()}
	}
	return &provider.Error{Service: service, Kind: provider.ErrConnect, Message: err.Error(), Cause: err}
}

// httpErr is the error of a response with an error status, read from
// its body.
func httpErr(service string, resp *http.Response) *provider.Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	return provider.HTTPError(service, resp.StatusCode, b)
}
