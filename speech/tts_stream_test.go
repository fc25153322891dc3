package speech_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/provider"
	"github.com/alicia-voice/alicia/speech"
)

func pcmOf(b []byte) []int16 {
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out
}

// Both streamed shapes play from the first bytes: the first audio event
// reaches the caller while the server still holds the rest back, waiting
// for the caller to have seen it.
func TestSynthesisPlaysFromFirstBytes(t *testing.T) {
	first, rest := make([]byte, 960), make([]byte, 4800) // 20 ms, then 100 ms at 24 kHz
	for i := range first {
		first[i] = byte(i*7 + 1)
	}
	for i := range rest {
		rest[i] = byte(i*3 + 5)
	}
	for _, shape := range []string{"audio", "sse"} {
		t.Run(shape, func(t *testing.T) {
			seen := make(chan struct{})
			var held atomic.Bool // the server waited for the caller, and was not let down
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req struct {
					Format string `json:"response_format"`
					Stream string `json:"stream_format"`
				}
				_ = json.NewDecoder(r.Body).Decode(&req)
				sse := req.Stream == "sse"
				if sse != (shape == "sse") || req.Format != "pcm" {
					http.Error(w, "unexpected request", http.StatusBadRequest)
					return
				}
				write := func(b []byte) {
					if sse {
						fmt.Fprintf(w, "data: {\"type\":\"speech.audio.delta\",\"audio\":%q}\n\n", base64.StdEncoding.EncodeToString(b))
					} else {
						_, _ = w.Write(b)
					}
				}
				if sse {
					w.Header().Set("Content-Type", "text/event-stream")
				} else {
					w.Header().Set("Content-Type", "audio/pcm")
				}
				write(first)
				w.(http.Flusher).Flush()
				select {
				case <-seen:
					held.Store(true)
				case <-time.After(5 * time.Second):
					return // the caller waits for the whole body: it gets a short one
				case <-r.Context().Done():
					return
				}
				write(rest)
				if sse {
					fmt.Fprint(w, "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":2,\"output_tokens\":0,\"total_tokens\":2}}\n\n")
				}
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			syn := &speech.OpenAISynthesizer{URL: srv.URL + "/v1", Model: "tts-1", StreamFormat: shape}
			var got []int16
			done := false
			for ev := range syn.Stream(ctx, &speech.SynthesizeRequest{Text: "hello there"}) {
				switch ev.Kind {
				case speech.SynthesizeAudio:
					if len(got) == 0 {
						if !slices.Equal(ev.Samples, pcmOf(first)) || ev.SampleRate != 24000 {
							t.Fatalf("first event: %d samples at %d Hz", len(ev.Samples), ev.SampleRate)
						}
						close(seen)
					}
					got = append(got, ev.Samples...)
				case speech.SynthesizeDone:
					done = true
				case speech.SynthesizeError:
					t.Fatal(ev.Err)
				}
			}
			if !held.Load() || !done || !slices.Equal(got, pcmOf(append(slices.Clone(first), rest...))) {
				t.Fatalf("server held %v, done %v, %d samples", held.Load(), done, len(got))
			}
		})
	}
}

// The stand-in's SSE shape carries exactly the audio of its chunked
// body, and the client reads both into the same samples.
func TestSynthesisSSEMatchesChunked(t *testing.T) {
	root := speechStandin(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var audio [2][]int16
	for i, shape := range []string{"audio", "sse"} {
		syn := &speech.OpenAISynthesizer{URL: root + "/v1", Model: "tts-1", Voice: "alloy", StreamFormat: shape}
		events := 0
		for ev := range syn.Stream(ctx, &speech.SynthesizeRequest{Text: other}) {
			switch ev.Kind {
			case speech.SynthesizeAudio:
				audio[i] = append(audio[i], ev.Samples...)
				events++
			case speech.SynthesizeError:
				t.Fatalf("%s: %v", shape, ev.Err)
			}
		}
		if events < 2 || len(audio[i]) < 24000/2 {
			t.Fatalf("%s: %d samples in %d events", shape, len(audio[i]), events)
		}
	}
	if !slices.Equal(audio[0], audio[1]) {
		t.Fatalf("chunked %d samples, SSE %d, not the same audio", len(audio[0]), len(audio[1]))
	}
}

// An event stream cut short, or carrying an error, is the provider error.
func TestSynthesisSSEErrors(t *testing.T) {
	for _, tc := range []struct {
		body string
		kind provider.ErrorKind
		msg  string
	}{
		{"data: {\"type\":\"speech.audio.delta\",\"audio\":\"AAAA\"}\n\n", provider.ErrTruncated, "the event stream ended without speech.audio.done"},
		{"data: {\"type\":\"error\",\"error\":{\"message\":\"voice not found\"}}\n\n", provider.ErrMidStream, "voice not found"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, tc.body)
		}))
		syn := &speech.OpenAISynthesizer{URL: srv.URL, StreamFormat: "sse"}
		var err error
		for ev := range syn.Stream(context.Background(), &speech.SynthesizeRequest{Text: "x"}) {
			err = ev.Err
		}
		srv.Close()
		var e *provider.Error
		if !errors.As(err, &e) || e.Kind != tc.kind || e.Message != tc.msg || e.Service != "tts" {
			t.Fatalf("%q: got %#v", tc.body, err)
		}
	}
}
