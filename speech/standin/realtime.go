package standin

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The realtime transcription session, in the three dialects servers
// speak. They differ only where the servers do:
//
//	openai       session.created {type: transcription, audio: …}; session.update
//	openai-beta  transcription_session.created / .update / .updated
//	speaches     session.created of a conversation session; session.update,
//	             refusing input_audio_format; the model in the URL is required;
//	             any other event is an invalid client event
//
// After a commit the OpenAI dialects send the transcript as word deltas
// and then completed, as OpenAI's transcription models do; speaches sends
// completed alone (its partial transcripts come only under its own VAD,
// which Alicia turns off). Like the servers, the stand-in refuses to
// commit less than 100 ms of audio. It has no VAD of its own: audio
// appended while turn_detection is still on gets an error event, so a
// client that forgot to turn it off finds out.

// minCommitSamples is 100 ms at the protocol's 24 kHz.
const minCommitSamples = PCMRate / 10

var upgrader = websocket.Upgrader{ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10}

var sessionSeq, fileSeq atomic.Int64

// rtSession is one connection's state. Only the read loop touches it,
// except out and jobs, which hand work to the writer and the recogniser,
// and the id counter, which the recogniser uses too.
type rtSession struct {
	s        *Server
	profile  string
	id       string
	model    string
	language string
	vad      bool // turn_detection is on
	warned   bool
	buf      []int16 // 24 kHz
	item     string
	previous string
	seq      atomic.Int64
	out      chan any
	jobs     chan rtJob
}

type rtJob struct {
	item  string
	audio []int16
}

func (s *Server) realtime(w http.ResponseWriter, r *http.Request, profile string) {
	q := r.URL.Query()
	if q.Get("intent") != "transcription" {
		apiError(w, http.StatusBadRequest, "the stand-in serves only realtime transcription (?intent=transcription)")
		return
	}
	model := q.Get("model")
	if profile == "speaches" && model == "" {
		apiError(w, http.StatusBadRequest, "model is required in the URL")
		return
	}
	if model == "" {
		model = "gpt-4o-transcribe"
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered
	}
	defer conn.Close()
	conn.SetReadLimit(16 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	rs := &rtSession{s: s, profile: profile, id: fmt.Sprintf("sess_standin_%d", sessionSeq.Add(1)), model: model,
		language: q.Get("language"), vad: true, out: make(chan any, 256), jobs: make(chan rtJob, 16)}
	rs.item = rs.newID("item")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case v := <-rs.out:
				_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if err := conn.WriteJSON(v); err != nil {
					cancel()
					_ = conn.Close()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		rs.recognizer(ctx)
	}()
	created := "session.created"
	if profile == "openai-beta" {
		created = "transcription_session.created"
	}
	rs.send(ctx, map[string]any{"type": created, "session": rs.session()})
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		rs.handle(ctx, data)
	}
}

func (rs *rtSession) newID(prefix string) string {
	return fmt.Sprintf("%s_standin_%d", prefix, rs.seq.Add(1))
}

func (rs *rtSession) send(ctx context.Context, ev map[string]any) {
	ev["event_id"] = rs.newID("event")
	select {
	case rs.out <- ev:
	case <-ctx.Done():
	}
}

// fail sends an error event. eventID is the client event it answers;
// speaches names none.
func (rs *rtSession) fail(ctx context.Context, code, msg, eventID string) {
	e := map[string]any{"type": "invalid_request_error", "message": msg, "code": nil, "param": nil, "event_id": nil}
	if rs.profile != "speaches" {
		if code != "" {
			e["code"] = code
		}
		if eventID != "" {
			e["event_id"] = eventID
		}
	}
	rs.send(ctx, map[string]any{"type": "error", "error": e})
}

func (rs *rtSession) turnDetection() any {
	if !rs.vad {
		return nil
	}
	return map[string]any{"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": 500}
}

// session is the session object in the profile's shape.
func (rs *rtSession) session() map[string]any {
	tr := map[string]any{"model": rs.model, "language": nilIfEmpty(rs.language)}
	switch rs.profile {
	case "openai-beta":
		return map[string]any{"id": rs.id, "object": "realtime.transcription_session", "input_audio_format": "pcm16",
			"input_audio_transcription": tr, "turn_detection": rs.turnDetection()}
	case "speaches":
		return map[string]any{"id": rs.id, "model": "gpt-4o-realtime-preview", "modalities": []string{"audio", "text"},
			"input_audio_format": "pcm16", "output_audio_format": "pcm16", "input_audio_transcription": tr,
			"turn_detection": rs.turnDetection(), "voice": "af_heart"}
	}
	return map[string]any{"id": rs.id, "object": "realtime.session", "type": "transcription", "audio": map[string]any{
		"input": map[string]any{"format": map[string]any{"type": "audio/pcm", "rate": PCMRate}, "transcription": tr,
			"turn_detection": rs.turnDetection()}}}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

type clientEvent struct {
	Type    string                     `json:"type"`
	EventID string                     `json:"event_id"`
	Audio   string                     `json:"audio"`
	Session map[string]json.RawMessage `json:"session"`
}

func (rs *rtSession) handle(ctx context.Context, data []byte) {
	var ev clientEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		rs.fail(ctx, "invalid_json", "the event is not JSON: "+err.Error(), "")
		return
	}
	update := map[string]string{"openai": "session.update", "openai-beta": "transcription_session.update", "speaches": "session.update"}[rs.profile]
	switch ev.Type {
	case update:
		rs.update(ctx, ev)
	case "input_audio_buffer.append":
		raw, err := base64.StdEncoding.DecodeString(ev.Audio)
		if err != nil || len(raw)%2 != 0 {
			rs.fail(ctx, "invalid_value", "audio must be base64 of 16-bit samples", ev.EventID)
			return
		}
		if rs.vad && !rs.warned {
			rs.warned = true
			rs.fail(ctx, "", "the stand-in has no server VAD: set turn_detection to null and commit", ev.EventID)
		}
		for i := 0; i < len(raw); i += 2 {
			rs.buf = append(rs.buf, int16(binary.LittleEndian.Uint16(raw[i:])))
		}
	case "input_audio_buffer.commit":
		if len(rs.buf) < minCommitSamples {
			rs.fail(ctx, "input_audio_buffer_commit_empty", fmt.Sprintf(
				"Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has %.2fms of audio.",
				float64(len(rs.buf))*1000/PCMRate), ev.EventID)
			return
		}
		rs.send(ctx, map[string]any{"type": "input_audio_buffer.committed", "item_id": rs.item, "previous_item_id": nilIfEmpty(rs.previous)})
		select {
		case rs.jobs <- rtJob{item: rs.item, audio: rs.buf}:
		case <-ctx.Done():
			return
		}
		rs.previous, rs.item, rs.buf = rs.item, rs.newID("item"), nil
	case "input_audio_buffer.clear":
		rs.buf, rs.item = nil, rs.newID("item")
		rs.send(ctx, map[string]any{"type": "input_audio_buffer.cleared"})
	default:
		if rs.profile == "speaches" {
			rs.fail(ctx, "", "Invalid client event: 1 validation error(s)", "")
			return
		}
		rs.fail(ctx, "invalid_event", "the stand-in does not handle "+ev.Type+" in a transcription session", ev.EventID)
	}
}

// update applies a session update in the profile's shape.
func (rs *rtSession) update(ctx context.Context, ev clientEvent) {
	sess := ev.Session
	var input map[string]json.RawMessage
	transcription, format := "input_audio_transcription", "input_audio_format"
	switch rs.profile {
	case "openai":
		var typ string
		_ = json.Unmarshal(sess["type"], &typ)
		if typ != "transcription" {
			rs.fail(ctx, "invalid_value", "session.type must be transcription in a transcription session", ev.EventID)
			return
		}
		var audio struct {
			Input map[string]json.RawMessage `json:"input"`
		}
		_ = json.Unmarshal(sess["audio"], &audio)
		input, transcription, format = audio.Input, "transcription", "format"
		if raw, ok := input[format]; ok {
			var f struct {
				Type string `json:"type"`
				Rate int    `json:"rate"`
			}
			_ = json.Unmarshal(raw, &f)
			if f.Type != "audio/pcm" || (f.Rate != 0 && f.Rate != PCMRate) {
				rs.fail(ctx, "invalid_value", "the stand-in takes audio/pcm at 24000 Hz", ev.EventID)
				return
			}
		}
	case "openai-beta":
		input = sess
		if raw, ok := input[format]; ok && string(raw) != `"pcm16"` {
			rs.fail(ctx, "invalid_value", "the stand-in takes pcm16", ev.EventID)
			return
		}
	case "speaches":
		input = sess
		if _, ok := input[format]; ok {
			rs.fail(ctx, "", "Specifying `session.input_audio_format` is not supported. The server either does not support this field or it is not configurable.", "")
		}
	}
	if raw, ok := input[transcription]; ok {
		var tr struct {
			Model    string `json:"model"`
			Language string `json:"language"`
		}
		_ = json.Unmarshal(raw, &tr)
		if tr.Model != "" {
			rs.model = tr.Model
		}
		rs.language = tr.Language
	}
	if raw, ok := input["turn_detection"]; ok {
		rs.vad = string(raw) != "null"
	}
	updated := "session.updated"
	if rs.profile == "openai-beta" {
		updated = "transcription_session.updated"
	}
	rs.send(ctx, map[string]any{"type": updated, "session": rs.session()})
}

// recognizer transcribes committed buffers in the order committed, while
// the read loop goes on taking audio.
func (rs *rtSession) recognizer(ctx context.Context) {
	for {
		var job rtJob
		select {
		case job = <-rs.jobs:
		case <-ctx.Done():
			return
		}
		text, err := rs.s.recognizeSamples(ctx, job.audio, PCMRate)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			rs.send(ctx, map[string]any{"type": "conversation.item.input_audio_transcription.failed", "item_id": job.item, "content_index": 0,
				"error": map[string]any{"type": "transcription_error", "code": nil, "message": err.Error()}})
			continue
		}
		if rs.profile != "speaches" {
			for i, w := range strings.Fields(text) {
				if i > 0 {
					w = " " + w
				}
				rs.send(ctx, map[string]any{"type": "conversation.item.input_audio_transcription.delta", "item_id": job.item, "content_index": 0, "delta": w})
			}
		}
		rs.send(ctx, map[string]any{"type": "conversation.item.input_audio_transcription.completed", "item_id": job.item, "content_index": 0,
			"transcript": text, "usage": map[string]any{"type": "duration", "seconds": float64(len(job.audio)) / PCMRate}})
	}
}

// recognizeSamples recognises a whole buffer.
func (s *Server) recognizeSamples(ctx context.Context, samples []int16, rate int) (string, error) {
	in := filepath.Join(s.dir, fmt.Sprintf("rt-%d.wav", fileSeq.Add(1)))
	defer os.Remove(in)
	if err := s.to16k(ctx, samples, rate, in); err != nil {
		return "", err
	}
	var segs []string
	if err := s.recognize(ctx, in, func(seg string) { segs = append(segs, seg) }); err != nil {
		return "", err
	}
	text := strings.Join(segs, " ")
	s.cfg.Log.Debug("speech stand-in recognised a realtime buffer", "text", text, "seconds", float64(len(samples))/float64(rate))
	return text, nil
}
