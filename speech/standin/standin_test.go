package standin_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/provider"
	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/speech/standin"
)

var phrases = []string{"what is the weather like in paris today", "how far is the moon", "stop"}

func serve(t *testing.T, cfg standin.Config) string {
	t.Helper()
	testenv.SpeechEngines(t)
	s, err := standin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); s.Close() })
	return srv.URL
}

// Every profile's wire format, read by the production client, gives the
// question back; the streaming ones give partials first.
func TestTranscriptionProfiles(t *testing.T) {
	base := serve(t, standin.Config{Phrases: phrases, Log: slog.New(slog.DiscardHandler)})
	question := "What is the weather like in Paris today?"
	audio := append(speechtest.Render(t, question, 140, speech.RecognitionRate), speechtest.Silence(300, speech.RecognitionRate)...)
	for _, tc := range []struct {
		path      string
		streaming bool
	}{{"/v1", false}, {"/v1", true}, {"/vllm/v1", true}, {"/speaches/v1", true}, {"/whispercpp/v1", true}} {
		t.Run(strings.Trim(tc.path, "/")+map[bool]string{true: "-stream"}[tc.streaming], func(t *testing.T) {
			rec := &speech.OpenAIRecognizer{URL: base + tc.path, Model: "whisper-1", Streaming: tc.streaming}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var partials []string
			var final string
			for ev := range rec.Stream(ctx, &speech.RecognizeRequest{Audio: audio, SampleRate: speech.RecognitionRate, Language: "en"}) {
				switch ev.Kind {
				case speech.RecognizePartial:
					partials = append(partials, ev.Text)
				case speech.RecognizeFinal:
					final = ev.Text
				case speech.RecognizeError:
					t.Fatal(ev.Err)
				}
			}
			wer := speechtest.WER(question, final)
			t.Logf("final %q partials %q WER %.2f", final, partials, wer)
			if wer > 0.2 {
				t.Fatalf("recognised %q for %q (WER %.2f)", final, question, wer)
			}
			streams := tc.streaming && tc.path != "/whispercpp/v1"
			if streams != (len(partials) > 0) {
				t.Fatalf("streaming %v but %d partials", streams, len(partials))
			}
		})
	}
}

// Synthesised speech, in both formats, is recognised as the text it says.
func TestSpeechRoundTrip(t *testing.T) {
	base := serve(t, standin.Config{Phrases: phrases, Log: slog.New(slog.DiscardHandler)})
	text := "How far is the moon?"
	for _, format := range []string{"pcm", "wav"} {
		t.Run(format, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			syn := &speech.OpenAISynthesizer{URL: base + "/v1", Model: "tts-1", Voice: "alloy", Format: format}
			var pcm []int16
			rate, chunks := 0, 0
			for ev := range syn.Stream(ctx, &speech.SynthesizeRequest{Text: text}) {
				switch ev.Kind {
				case speech.SynthesizeAudio:
					pcm = append(pcm, ev.Samples...)
					rate = ev.SampleRate
					chunks++
				case speech.SynthesizeError:
					t.Fatal(ev.Err)
				}
			}
			if rate != standin.PCMRate || len(pcm) < rate/2 || chunks < 2 {
				t.Fatalf("got %d samples at %d Hz in %d chunks", len(pcm), rate, chunks)
			}
			rec := &speech.OpenAIRecognizer{URL: base + "/v1", Model: "whisper-1"}
			var final string
			for ev := range rec.Stream(ctx, &speech.RecognizeRequest{Audio: pcm, SampleRate: rate}) {
				if ev.Kind == speech.RecognizeError {
					t.Fatal(ev.Err)
				}
				final = ev.Text
			}
			if speechtest.WER(text, final) > 0 {
				t.Fatalf("heard %q for %q", final, text)
			}
		})
	}
}

// Errors come back in OpenAI's shape and become typed errors.
func TestErrors(t *testing.T) {
	base := serve(t, standin.Config{Log: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	syn := &speech.OpenAISynthesizer{URL: base + "/v1", Format: "flac"}
	var err error
	for ev := range syn.Stream(ctx, &speech.SynthesizeRequest{Text: "hello"}) {
		err = ev.Err
	}
	var e *provider.Error
	ok := errors.As(err, &e)
	if !ok || e.Kind != provider.ErrHTTP || e.Status != 400 || !strings.Contains(e.Message, "flac") || e.Retryable() {
		t.Fatalf("got %#v", err)
	}
	rec := &speech.OpenAIRecognizer{URL: "http://127.0.0.1:1/v1"}
	for ev := range rec.Stream(ctx, &speech.RecognizeRequest{Audio: make([]int16, 160), SampleRate: 16000}) {
		err = ev.Err
	}
	if !errors.As(err, &e) || e.Kind != provider.ErrConnect || !e.Retryable() {
		t.Fatalf("got %#v", err)
	}
}

// A listener's "uh-huh" is heard as the backchannel it is, from the
// audio: a grammar that admits it still hears nothing in noise, and a
// question as the question. The grammar has no one-word phrase: the
// decoder takes a short breathy sound for a "stop" as readily as for an
// "uh huh".
func TestBackchannel(t *testing.T) {
	base := serve(t, standin.Config{Phrases: []string{"what is the weather like in paris today", "how far is the moon", "mm hmm", "uh huh"}, Log: slog.New(slog.DiscardHandler)})
	pad := func(pcm []int16) []int16 {
		return slices.Concat(speechtest.Silence(200, speech.RecognitionRate), pcm, speechtest.Silence(500, speech.RecognitionRate))
	}
	for _, tc := range []struct {
		name, want string
		audio      []int16
	}{
		{"uh-huh", "uh huh", pad(speechtest.UhHuh(t, speech.RecognitionRate))},
		{"noise", "", pad(speechtest.Burst(300, speech.RecognitionRate, -20, 7))},
		{"question", "how far is the moon", pad(speechtest.Render(t, "How far is the moon?", 140, speech.RecognitionRate))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if final := heard(t, base, tc.audio, speech.RecognitionRate); final != tc.want {
				t.Fatalf("heard %q, not %q", final, tc.want)
			}
		})
	}
}

// heard is the stand-in's last transcript of audio, streamed to it as
// the bot's recogniser streams.
func heard(t *testing.T, base string, audio []int16, rate int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &speech.OpenAIRecognizer{URL: base + "/v1", Model: "whisper-1", Streaming: true}
	var final string
	for ev := range rec.Stream(ctx, &speech.RecognizeRequest{Audio: audio, SampleRate: rate}) {
		if ev.Kind == speech.RecognizeError {
			t.Fatal(ev.Err)
		}
		final = ev.Text
	}
	return final
}

// What the bot's recogniser was given in a browser test, the page's
// microphone carried by Chromium and Opus while the page played an
// answer: "What is the weather like in Paris today?", said just clearly
// enough, is recognised (at pocketsphinx's default word beam nothing came
// back), and a hummed "mm-hm" is still not taken for either phrase.
func TestPhrasesAfterABrowser(t *testing.T) {
	question, other := "What is the weather like in Paris today?", "How far is the moon?"
	base := serve(t, standin.Config{Phrases: []string{other, question}, Log: slog.New(slog.DiscardHandler)})
	for _, c := range []struct{ file, want string }{
		{"testdata/paris-in-double-talk.wav", question},
		{"testdata/hum-in-double-talk.wav", ""},
	} {
		f, err := os.Open(c.file)
		if err != nil {
			t.Fatal(err)
		}
		audio, rate, err := speech.DecodeWAV(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := heard(t, base, audio, rate); standin.Normalize(got) != standin.Normalize(c.want) {
			t.Errorf("%s: recognised %q, want %q", c.file, got, c.want)
		}
	}
}
