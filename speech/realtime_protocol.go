package speech

import (
	"context"
	"encoding/json"

	"github.com/alicia-voice/alicia/internal/provider"
)

// serverEvent is the part of a server event the client reads.
type serverEvent struct {
	Type       string          `json:"type"`
	ItemID     string          `json:"item_id"`
	Delta      string          `json:"delta"`
	Transcript string          `json:"transcript"`
	Session    json.RawMessage `json:"session"`
	Error      *serverError    `json:"error"`
}

type serverError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	EventID string `json:"event_id"`
}

func (e *serverError) toError() *provider.Error {
	if e == nil {
		return sttErr(provider.ErrMidStream, "an error event without an error", nil)
	}
	msg := e.Message
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	return sttErr(provider.ErrMidStream, msg, nil)
}

func (s *RealtimeStream) readEvent() (serverEvent, error) {
	var ev serverEvent
	_, data, err := s.conn.ReadMessage()
	if err != nil {
		return ev, err
	}
	if err := json.Unmarshal(data, &ev); err != nil || ev.Type == "" {
		return ev, sttErr(provider.ErrProtocol, "unreadable event: "+truncate(string(data), 200), err)
	}
	return ev, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// handshake reads the created event, configures the session in the
// server's dialect and waits for the server to accept it, so that a
// refused configuration fails Open rather than the first utterance.
func (s *RealtimeStream) handshake(ctx context.Context, model, language, prompt string) error {
	unblock := context.AfterFunc(ctx, func() { _ = s.conn.Close() })
	defer unblock()
	ev, err := s.readEvent()
	if err != nil {
		return err
	}
	var d dialect
	switch ev.Type {
	case "transcription_session.created":
		d = dialectBeta
	case "session.created":
		var sess struct {
			Type  string          `json:"type"`
			Audio json.RawMessage `json:"audio"`
		}
		_ = json.Unmarshal(ev.Session, &sess)
		d = dialectSession
		if sess.Type == "transcription" || len(sess.Audio) > 0 {
			d = dialectGA
		}
	case "error":
		return ev.Error.toError()
	default:
		return sttErr(provider.ErrProtocol, "expected session.created, got "+ev.Type, nil)
	}
	if err := s.send(sessionUpdate(d, model, language, prompt)); err != nil {
		return err
	}
	for {
		ev, err := s.readEvent()
		if err != nil {
			return err
		}
		switch ev.Type {
		case "session.updated", "transcription_session.updated":
			return nil
		case "error":
			return ev.Error.toError()
		}
	}
}

func sessionUpdate(d dialect, model, language, prompt string) map[string]any {
	tr := map[string]any{"model": model}
	if language != "" {
		tr["language"] = language
	}
	if prompt != "" && d != dialectSession {
		tr["prompt"] = prompt
	}
	switch d {
	case dialectGA:
		return map[string]any{"type": "session.update", "session": map[string]any{
			"type": "transcription",
			"audio": map[string]any{"input": map[string]any{
				"format":         map[string]any{"type": "audio/pcm", "rate": RealtimeRate},
				"transcription":  tr,
				"turn_detection": nil,
			}},
		}}
	case dialectBeta:
		return map[string]any{"type": "transcription_session.update", "session": map[string]any{
			"input_audio_format":        "pcm16",
			"input_audio_transcription": tr,
			"turn_detection":            nil,
		}}
	}
	return map[string]any{"type": "session.update", "session": map[string]any{
		"input_audio_transcription": tr,
		"turn_detection":            nil,
	}}
}
