package standin_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/alicia-voice/alicia/speech/standin"
)

type wsEvent struct {
	Type    string         `json:"type"`
	Session map[string]any `json:"session"`
	Error   struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		EventID string `json:"event_id"`
	} `json:"error"`
}

func dialRealtime(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func expectEvent(t *testing.T, c *websocket.Conn, typ string) wsEvent {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ev wsEvent
	if err := c.ReadJSON(&ev); err != nil {
		t.Fatalf("waiting for %s: %v", typ, err)
	}
	if ev.Type != typ {
		t.Fatalf("want %s, got %+v", typ, ev)
	}
	return ev
}

// The realtime endpoint speaks each dialect's details, the ones the
// client is built around: who names the refused event, which update
// event each takes, what speaches refuses, and that nothing is
// transcribed by a VAD the stand-in does not have.
func TestRealtimeProtocol(t *testing.T) {
	ws := "ws" + strings.TrimPrefix(serve(t, standin.Config{Log: slog.New(slog.DiscardHandler)}), "http")

	c := dialRealtime(t, ws+"/v1/realtime?intent=transcription")
	if s := expectEvent(t, c, "session.created").Session; s["type"] != "transcription" || s["audio"] == nil {
		t.Fatalf("GA session %v", s)
	}
	_ = c.WriteJSON(map[string]any{"type": "input_audio_buffer.append", "audio": "AAAAAA=="})
	if e := expectEvent(t, c, "error").Error; !strings.Contains(e.Message, "VAD") {
		t.Fatalf("appending under server VAD: %+v", e)
	}
	_ = c.WriteJSON(map[string]any{"type": "session.update", "session": map[string]any{"type": "transcription",
		"audio": map[string]any{"input": map[string]any{"format": map[string]any{"type": "audio/pcm", "rate": 24000}, "turn_detection": nil}}}})
	if s := expectEvent(t, c, "session.updated").Session; s["audio"].(map[string]any)["input"].(map[string]any)["turn_detection"] != nil {
		t.Fatalf("turn detection still on: %v", s)
	}
	_ = c.WriteJSON(map[string]any{"type": "input_audio_buffer.commit", "event_id": "mine_1"})
	if e := expectEvent(t, c, "error").Error; e.Code != "input_audio_buffer_commit_empty" || e.EventID != "mine_1" {
		t.Fatalf("empty commit: %+v", e)
	}

	c = dialRealtime(t, ws+"/openai-beta/v1/realtime?intent=transcription")
	expectEvent(t, c, "transcription_session.created")
	_ = c.WriteJSON(map[string]any{"type": "transcription_session.update", "session": map[string]any{"input_audio_format": "pcm16", "turn_detection": nil}})
	expectEvent(t, c, "transcription_session.updated")

	if _, resp, err := websocket.DefaultDialer.Dial(ws+"/speaches/v1/realtime?intent=transcription", nil); err == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("speaches without a model: %v", err)
	}
	c = dialRealtime(t, ws+"/speaches/v1/realtime?intent=transcription&model=Systran/faster-whisper-small")
	if s := expectEvent(t, c, "session.created").Session; s["input_audio_transcription"].(map[string]any)["model"] != "Systran/faster-whisper-small" {
		t.Fatalf("speaches session %v", s)
	}
	_ = c.WriteJSON(map[string]any{"type": "transcription_session.update", "session": map[string]any{}})
	if e := expectEvent(t, c, "error").Error; !strings.HasPrefix(e.Message, "Invalid client event") {
		t.Fatalf("speaches on a beta event: %+v", e)
	}
	_ = c.WriteJSON(map[string]any{"type": "session.update", "session": map[string]any{"input_audio_format": "pcm16", "turn_detection": nil}})
	if e := expectEvent(t, c, "error").Error; !strings.Contains(e.Message, "input_audio_format") || e.EventID != "" {
		t.Fatalf("speaches on input_audio_format: %+v", e)
	}
	expectEvent(t, c, "session.updated")
	_ = c.WriteJSON(map[string]any{"type": "input_audio_buffer.clear"})
	expectEvent(t, c, "input_audio_buffer.cleared")
}

// stream_format sse answers with speech.audio.delta events and a done
// event with usage, as OpenAI does.
func TestSpeechSSE(t *testing.T) {
	base := serve(t, standin.Config{Log: slog.New(slog.DiscardHandler)})
	resp, err := http.Post(base+"/v1/audio/speech", "application/json",
		strings.NewReader(`{"model":"tts-1","input":"How far is the moon?","voice":"alloy","response_format":"pcm","stream_format":"sse"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var types []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string         `json:"type"`
			Audio string         `json:"audio"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if (ev.Type == "speech.audio.delta") != (ev.Audio != "") || (ev.Type == "speech.audio.done") != (ev.Usage != nil) {
			t.Fatalf("event %s", data)
		}
		types = append(types, ev.Type)
	}
	if len(types) < 3 || types[len(types)-1] != "speech.audio.done" {
		t.Fatalf("events %v", types)
	}
	bad, err := http.Post(base+"/v1/audio/speech", "application/json",
		strings.NewReader(`{"input":"hi","response_format":"wav","stream_format":"sse"}`))
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Fatalf("sse with wav: %d", bad.StatusCode)
	}
}
