package speech_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/alicia-voice/alicia/internal/provider"
	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/speech/standin"
)

const (
	question = "What is the weather like in Paris today?"
	other    = "How far is the moon?"
	// rate is what recognisers are given, and frameSamples one 20 ms
	// frame of it, as the voice stage streams it.
	rate          = speech.RecognitionRate
	frameDuration = 20 * time.Millisecond
	frameSamples  = rate * int(frameDuration/time.Millisecond) / 1000
)

// speechStandin serves the speech stand-in limited to the test phrases
// and returns its root URL (profiles are paths under it). With sent, it
// counts the bytes clients send it.
func speechStandin(t testing.TB, sent *atomic.Int64) string {
	t.Helper()
	testenv.SpeechEngines(t)
	s, err := standin.New(standin.Config{Phrases: []string{question, other, "yes"}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	if sent != nil {
		srv.Listener = countingListener{srv.Listener, sent}
	}
	srv.Start()
	t.Cleanup(func() { srv.Close(); s.Close() })
	return srv.URL
}

// appendPaced appends pcm in 20 ms frames, speed times faster than real
// time, as the stage would while the user speaks.
func appendPaced(t testing.TB, s *speech.RealtimeStream, pcm []int16, speed float64) {
	t.Helper()
	pause := time.Duration(float64(frameDuration) / speed)
	for i := 0; i < len(pcm); i += frameSamples {
		if err := s.Append(pcm[i:min(i+frameSamples, len(pcm))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(pause)
	}
}

func nextRealtimeEvent(t testing.TB, s *speech.RealtimeStream) speech.RealtimeEvent {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		if !ok {
			t.Fatalf("the stream ended: %v", s.Err())
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no recognition event within 30 s")
	}
	return speech.RealtimeEvent{}
}

// utteranceResult collects one utterance's events up to its last.
func utteranceResult(t testing.TB, s *speech.RealtimeStream, utt int) (partials []string, final string) {
	t.Helper()
	for {
		ev := nextRealtimeEvent(t, s)
		if ev.Utterance != utt {
			t.Fatalf("event of utterance %d while waiting for %d: %+v", ev.Utterance, utt, ev)
		}
		switch ev.Kind {
		case speech.RecognizePartial:
			partials = append(partials, ev.Text)
		case speech.RecognizeFinal:
			return partials, ev.Text
		case speech.RecognizeError:
			t.Fatalf("utterance %d: %v", utt, ev.Err)
		}
	}
}

// A question streamed over the realtime WebSocket as it is spoken comes
// back as interim transcripts and a final one, in each dialect the
// protocol has (the client finds which from the server's first event).
func TestRealtimeRecognizer(t *testing.T) {
	root := speechStandin(t, nil)
	audio := append(speechtest.Render(t, question, 140, rate), speechtest.Silence(300, rate)...)
	for _, tc := range []struct {
		name, profile string
		partials      bool
	}{{"openai", "", true}, {"openai-beta", "/openai-beta", true}, {"speaches", "/speaches", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rec := &speech.RealtimeRecognizer{URL: root + tc.profile + "/v1", Model: "whisper-1", Language: "en"}
			s, err := rec.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.Utterance(); got != 1 {
				t.Fatalf("first utterance is %d", got)
			}
			appendPaced(t, s, audio, 4)
			utt, err := s.Commit()
			if err != nil || utt != 1 {
				t.Fatalf("commit: %d, %v", utt, err)
			}
			partials, final := utteranceResult(t, s, utt)
			wer := speechtest.WER(question, final)
			t.Logf("final %q partials %q WER %.2f", final, partials, wer)
			if wer > 0.2 {
				t.Fatalf("recognised %q for %q (WER %.2f)", final, question, wer)
			}
			if tc.partials != (len(partials) > 0) {
				t.Fatalf("want partials %v, got %q", tc.partials, partials)
			}
			for _, p := range partials {
				if !strings.HasPrefix(final, p) {
					t.Fatalf("partial %q is not the start of %q", p, final)
				}
			}
		})
	}
}

// Two utterances on one connection come back as two finals, in order,
// each tagged with its own number; a false start cleared between them
// gives nothing, and a commit of almost nothing finishes empty without
// bothering the server.
func TestRealtimeUtterancesInOrder(t *testing.T) {
	root := speechStandin(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := (&speech.RealtimeRecognizer{URL: root + "/v1", Model: "whisper-1"}).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := append(speechtest.Render(t, question, 140, rate), speechtest.Silence(300, rate)...)
	second := append(speechtest.Render(t, other, 140, rate), speechtest.Silence(300, rate)...)

	appendPaced(t, s, first, 8)
	u1, err := s.Commit()
	if err != nil {
		t.Fatal(err)
	}
	appendPaced(t, s, speechtest.Click(200, rate), 8)
	cleared, err := s.Clear()
	if err != nil {
		t.Fatal(err)
	}
	appendPaced(t, s, second, 8)
	u2, err := s.Commit()
	if err != nil {
		t.Fatal(err)
	}
	appendPaced(t, s, speechtest.Silence(40, rate), 8)
	u3, err := s.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if u1 != 1 || cleared != 2 || u2 != 3 || u3 != 4 {
		t.Fatalf("utterances %d, %d (cleared), %d, %d", u1, cleared, u2, u3)
	}
	_, f1 := utteranceResult(t, s, u1)
	_, f2 := utteranceResult(t, s, u2)
	_, f3 := utteranceResult(t, s, u3)
	if speechtest.WER(question, f1) > 0.2 || speechtest.WER(other, f2) > 0.2 || f3 != "" {
		t.Fatalf("finals %q, %q, %q", f1, f2, f3)
	}
}

// The Recognizer interface over the WebSocket: the whole utterance at
// once, at any sample rate.
func TestRealtimeRecognizerStream(t *testing.T) {
	root := speechStandin(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rec speech.Recognizer = &speech.RealtimeRecognizer{URL: root + "/openai-beta/v1", Model: "whisper-1"}
	audio := append(speechtest.Render(t, other, 140, 22050), speechtest.Silence(300, 22050)...)
	var partials int
	var final string
	for ev := range rec.Stream(ctx, &speech.RecognizeRequest{Audio: audio, SampleRate: 22050, Language: "en"}) {
		switch ev.Kind {
		case speech.RecognizePartial:
			partials++
		case speech.RecognizeFinal:
			final = ev.Text
		case speech.RecognizeError:
			t.Fatal(ev.Err)
		}
	}
	if speechtest.WER(other, final) > 0.2 || partials == 0 {
		t.Fatalf("final %q after %d partials", final, partials)
	}
}

// fakeRealtime is a server that speaks the protocol as the script says,
// for what the stand-in never does: refusing a session, failing an
// utterance.
func fakeRealtime(t *testing.T, script func(c *websocket.Conn, ev map[string]any)) string {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.WriteJSON(map[string]any{"type": "session.created", "session": map[string]any{"type": "transcription", "audio": map[string]any{}}})
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			var ev map[string]any
			_ = json.Unmarshal(data, &ev)
			script(c, ev)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func wantServerErr(t *testing.T, err error, msg string) {
	t.Helper()
	var e *provider.Error
	if !errors.As(err, &e) || e.Kind != provider.ErrMidStream || !strings.Contains(e.Message, msg) || e.Service != "stt" {
		t.Fatalf("want a server error with %q, got %#v", msg, err)
	}
}

// A server's error events become the provider error: a refused session
// fails Open; an error about a commit (named by its event_id, or not
// named at all) fails that utterance and no other.
func TestRealtimeServerErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	refusing := fakeRealtime(t, func(c *websocket.Conn, ev map[string]any) {
		if ev["type"] == "session.update" {
			_ = c.WriteJSON(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "code": "model_not_found", "message": "no such model"}})
		}
	})
	_, err := (&speech.RealtimeRecognizer{URL: refusing, Model: "nope"}).Open(ctx)
	wantServerErr(t, err, "no such model (model_not_found)")

	commits := 0
	failing := fakeRealtime(t, func(c *websocket.Conn, ev map[string]any) {
		switch ev["type"] {
		case "session.update":
			_ = c.WriteJSON(map[string]any{"type": "session.updated"})
		case "input_audio_buffer.commit":
			commits++
			switch commits {
			case 1: // OpenAI names the client event it refuses
				_ = c.WriteJSON(map[string]any{"type": "error", "error": map[string]any{"message": "buffer refused", "event_id": ev["event_id"]}})
			case 2: // committed, then the transcription fails
				_ = c.WriteJSON(map[string]any{"type": "input_audio_buffer.committed", "item_id": "item_2"})
				_ = c.WriteJSON(map[string]any{"type": "conversation.item.input_audio_transcription.failed", "item_id": "item_2",
					"error": map[string]any{"message": "decoder crashed"}})
			case 3: // committed, then an error that names nothing
				_ = c.WriteJSON(map[string]any{"type": "input_audio_buffer.committed", "item_id": "item_3"})
				_ = c.WriteJSON(map[string]any{"type": "error", "error": map[string]any{"type": "server_error", "message": "Transcription failed"}})
			case 4: // speaches refuses a commit naming nothing
				_ = c.WriteJSON(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "buffer too small"}})
			case 5:
				_ = c.WriteJSON(map[string]any{"type": "input_audio_buffer.committed", "item_id": "item_5"})
				_ = c.WriteJSON(map[string]any{"type": "conversation.item.input_audio_transcription.completed", "item_id": "item_5", "transcript": " fine "})
			}
		}
	})
	s, err := (&speech.RealtimeRecognizer{URL: failing, Model: "m"}).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 5 {
		if err := s.Append(make([]int16, rate/2)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for utt, want := range []string{"buffer refused", "decoder crashed", "Transcription failed", "buffer too small"} {
		ev := nextRealtimeEvent(t, s)
		if ev.Utterance != utt+1 || ev.Kind != speech.RecognizeError {
			t.Fatalf("want utterance %d's error, got %+v", utt+1, ev)
		}
		wantServerErr(t, ev.Err, want)
	}
	if ev := nextRealtimeEvent(t, s); ev.Utterance != 5 || ev.Kind != speech.RecognizeFinal || ev.Text != "fine" {
		t.Fatalf("want utterance 5's final, got %+v", ev)
	}
}

// A lost connection fails the utterances waiting for a transcript and
// ends Events; Err says why, and nothing more can be sent.
func TestRealtimeConnectionLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := fakeRealtime(t, func(c *websocket.Conn, ev map[string]any) {
		switch ev["type"] {
		case "session.update":
			_ = c.WriteJSON(map[string]any{"type": "session.updated"})
		case "input_audio_buffer.commit":
			_ = c.WriteJSON(map[string]any{"type": "input_audio_buffer.committed", "item_id": "item_1"})
			_ = c.Close()
		}
	})
	s, err := (&speech.RealtimeRecognizer{URL: url, Model: "m"}).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_ = s.Append(make([]int16, rate))
	if _, err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	ev := nextRealtimeEvent(t, s)
	var e *provider.Error
	if ev.Utterance != 1 || ev.Kind != speech.RecognizeError || !errors.As(ev.Err, &e) || e.Kind != provider.ErrConnect || !e.Retryable() {
		t.Fatalf("got %+v", ev)
	}
	if _, ok := <-s.Events(); ok {
		t.Fatal("Events still open")
	}
	if !errors.As(s.Err(), &e) || e.Kind != provider.ErrConnect {
		t.Fatalf("Err %v", s.Err())
	}
	if err := s.Append(make([]int16, 320)); err == nil {
		t.Fatal("Append on a dead stream succeeded")
	}
}

// Close and a cancelled context stop the stream's goroutines; Close
// after a cancel is harmless, and Events ends both times.
func TestRealtimeCloseStopsGoroutines(t *testing.T) {
	root := speechStandin(t, nil)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rec := &speech.RealtimeRecognizer{URL: root + "/v1", Model: "whisper-1"}

	s, err := rec.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	appendPaced(t, s, speechtest.Silence(400, rate), 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.Events(); ok || s.Err() != nil {
		t.Fatalf("after Close: Events open %v, Err %v", ok, s.Err())
	}
	if _, err := s.Commit(); err == nil {
		t.Fatal("Commit after Close succeeded")
	}

	ctx, cancel := context.WithCancel(context.Background())
	s, err = rec.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range s.Events() {
	}
	var e *provider.Error
	if !errors.As(s.Err(), &e) || e.Kind != provider.ErrCancelled {
		t.Fatalf("after cancel: Err %v", s.Err())
	}
	_ = s.Close()
}
