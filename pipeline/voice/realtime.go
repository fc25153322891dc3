package voice

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/livekit/media-sdk"

	"github.com/alicia-voice/alicia/internal/queue"
)

// RealtimeRecognizer speaks OpenAI's Realtime transcription protocol, a
// WebSocket at {URL}/realtime?intent=transcription, as OpenAI and
// speaches serve it. Audio goes to the server while the user speaks, once.
// Over HTTP the whole utterance is uploaded when it ends, and again for
// every interim transcript, so the upload grows with the square of the
// utterance's length (BenchmarkInterimCost) and the final transcript
// waits for the upload. The server's first event tells which of the
// protocol's shapes it speaks (OpenAI's transcription session, its beta
// transcription_session, speaches' conversation-shaped session), so
// nothing needs configuring.
//
// When partial transcripts come depends on the server: OpenAI's
// transcription models stream the transcript as deltas once the utterance
// is committed; speaches sends partials only under its own VAD, so none
// here.
//
// Alicia's own VAD decides where an utterance ends: the session is opened
// with turn_detection null and the client commits. A server VAD would cut
// utterances where Alicia's endpointer (which waits longer after an
// unfinished sentence) does not, and the two would disagree on what a turn
// is.
//
// Open one RealtimeStream per speaker and keep it for the conversation:
// the TCP, TLS and session set-up then happen once, not on the path from
// the end of speech to the transcript. Stream, which makes it a
// Recognizer, opens a connection per call instead, for callers that have
// a whole utterance.
type RealtimeRecognizer struct {
	// URL is the server's base URL including /v1, the same as
	// OpenAIRecognizer's; http and https become ws and wss.
	URL    string
	Model  string
	APIKey string
	// Language is an ISO-639-1 hint; empty lets the server detect it.
	Language string
	// Dialer defaults to websocket.DefaultDialer.
	Dialer *websocket.Dialer
	Logger *slog.Logger
}

const (
	// RealtimeRate is the only rate of the protocol's pcm16 (mono,
	// little-endian); the stream resamples the caller's audio to it.
	RealtimeRate = 24000
	// minCommit: OpenAI and speaches refuse to commit less than 100 ms
	// of audio with an error, so shorter utterances are cleared instead
	// and finish with an empty transcript; the margin covers the
	// resampler's rounding. The endpointer never ends speech that short.
	minCommit = 120 * time.Millisecond
	// realtimeBacklog is how many operations may wait for the
	// connection: 30 s of 20 ms frames. A connection that far behind is
	// broken, and the stream fails rather than hide lost audio.
	realtimeBacklog = 1500
	realtimeWrite   = 10 * time.Second
	// realtimeSetup bounds the dial and the session handshake when the
	// caller's context has no deadline.
	realtimeSetup = 15 * time.Second
	// realtimeMessage bounds one server message; transcripts are small.
	realtimeMessage = 4 << 20
)

// RealtimeEvent is a recognition event of one utterance of a stream.
type RealtimeEvent struct {
	// Utterance is the number Utterance, Commit or Clear gave the audio
	// the event is about, from 1; 0 is an error of the session itself,
	// which ends no utterance.
	Utterance int
	RecognizeEvent
}

// dialect is which of the protocol's shapes the server speaks; the
// session.created event tells them apart, so nothing needs configuring.
type dialect uint8

const (
	// dialectGA: OpenAI's Realtime API, a transcription session
	// configured by session.update {type: transcription, audio: …}.
	dialectGA dialect = iota + 1
	// dialectBeta: OpenAI's beta transcription sessions,
	// transcription_session.update.
	dialectBeta
	// dialectSession: speaches, which keeps the beta conversation
	// session's shape (session.update with input_audio_transcription)
	// and rejects fields it does not support, such as
	// input_audio_format.
	dialectSession
)

type opKind uint8

const (
	opAppend opKind = iota + 1
	opCommit
	opClear
)

// rtOp is one operation for the writer goroutine.
type rtOp struct {
	kind    opKind
	pcm     []int16
	eventID string
}

type endKind uint8

const (
	endCommit endKind = iota + 1
	endEmpty          // a commit of too little audio, sent as a clear
	endClear
)

// rtEnd is a commit or clear sent, waiting for the server's committed
// or cleared. The server answers them in order, which is how its item
// ids are matched to utterance numbers.
type rtEnd struct {
	kind    endKind
	utt     int
	eventID string
}

// RealtimeStream is one open transcription session. Append, Commit,
// Clear and Utterance never wait on the network, so a loop that sees
// 20 ms frames can call them inline; a writer goroutine sends and a
// reader goroutine turns the server's events into Events. Both belong to
// the stream: Close stops them.
type RealtimeStream struct {
	conn *websocket.Conn
	rate int
	log  *slog.Logger
	// ops is a queue, not a channel, so that an idle stream holds no
	// backlog's worth of buffer.
	ops    *queue.Queue[rtOp]
	events chan RealtimeEvent
	done   chan struct{} // closed by Close: nobody reads Events any more
	stop   chan struct{} // closed when the stream ends, whatever the cause

	stopOnce, closeOnce sync.Once
	wg                  sync.WaitGroup
	unbind              func() bool

	mu      sync.Mutex
	err     error
	open    int // the utterance appended audio belongs to
	samples int // appended to it so far
	seq     int
	ends    []rtEnd
	over    map[int]bool // utterances that had their last event, or were cleared
	// committed lists the committed utterances whose last event has not
	// been delivered, oldest first; held keeps last events that came
	// before an older utterance's.
	committed []int
	held      map[int]RecognizeEvent

	// The reader goroutine's own.
	items    map[string]int
	texts    map[int]string
	awaiting []int // committed, waiting for a transcript, oldest first
}

// Open connects and configures a session. ctx bounds the set-up and the
// stream's life: cancelling it ends the stream as a failure would.
func (r *RealtimeRecognizer) Open(ctx context.Context) (*RealtimeStream, error) {
	return r.open(ctx, InputRate, r.Language, "")
}

func (r *RealtimeRecognizer) open(ctx context.Context, rate int, language, prompt string) (*RealtimeStream, error) {
	endpoint, err := r.endpoint()
	if err != nil {
		return nil, sttErr(ErrConnect, err.Error(), err)
	}
	header := http.Header{}
	if r.APIKey != "" {
		header.Set("Authorization", "Bearer "+r.APIKey)
	}
	dialer := r.Dialer
	if dialer == nil {
		dialer = websocket.DefaultDialer
	}
	setup, cancel := context.WithTimeout(ctx, realtimeSetup)
	defer cancel()
	conn, resp, err := dialer.DialContext(setup, endpoint, header)
	if err != nil {
		if resp != nil && resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, httpErr("stt", resp)
		}
		return nil, setupErr(ctx, setup, err)
	}
	conn.SetReadLimit(realtimeMessage)
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &RealtimeStream{
		conn: conn, rate: rate, log: log,
		ops: queue.New[rtOp](), events: make(chan RealtimeEvent, 64),
		done: make(chan struct{}), stop: make(chan struct{}),
		open: 1, over: map[int]bool{}, held: map[int]RecognizeEvent{}, items: map[string]int{}, texts: map[int]string{},
	}
	if err := s.handshake(setup, r.Model, language, prompt); err != nil {
		_ = conn.Close()
		return nil, setupErr(ctx, setup, err)
	}
	s.wg.Add(2)
	go s.read()
	go s.write()
	s.unbind = context.AfterFunc(ctx, func() {
		s.shutdown(&Error{Service: "stt", Kind: ErrCancelled, cause: ctx.Err()})
	})
	return s, nil
}

// setupErr says why Open failed: the caller's context, the set-up's own
// time limit, or the server.
func setupErr(ctx, setup context.Context, err error) error {
	var e *Error
	switch {
	case ctx.Err() != nil:
		return &Error{Service: "stt", Kind: ErrCancelled, cause: ctx.Err()}
	case setup.Err() != nil:
		return sttErr(ErrConnect, fmt.Sprintf("no transcription session within %v", realtimeSetup), err)
	case errors.As(err, &e):
		return e
	}
	return sttErr(ErrConnect, err.Error(), err)
}

func (r *RealtimeRecognizer) endpoint() (string, error) {
	u, err := url.Parse(strings.TrimSuffix(r.URL, "/"))
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("the recogniser's URL %q is not http(s) or ws(s)", r.URL)
	}
	if !strings.HasSuffix(u.Path, "/realtime") {
		u.Path += "/realtime"
	}
	q := u.Query()
	q.Set("intent", "transcription")
	// speaches requires the model in the URL; OpenAI accepts it there.
	if r.Model != "" {
		q.Set("model", r.Model)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

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

func (e *serverError) toError() *Error {
	if e == nil {
		return sttErr(ErrServer, "an error event without an error", nil)
	}
	msg := e.Message
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	return sttErr(ErrServer, msg, nil)
}

func (s *RealtimeStream) readEvent() (serverEvent, error) {
	var ev serverEvent
	_, data, err := s.conn.ReadMessage()
	if err != nil {
		return ev, err
	}
	if err := json.Unmarshal(data, &ev); err != nil || ev.Type == "" {
		return ev, sttErr(ErrProtocol, "unreadable event: "+truncate(string(data), 200), err)
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
		return sttErr(ErrProtocol, "expected session.created, got "+ev.Type, nil)
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

func (s *RealtimeStream) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(realtimeWrite))
	return s.conn.WriteMessage(websocket.TextMessage, b)
}

// Events delivers the recognition events. Each utterance ends with one
// RecognizeFinal or RecognizeError, and those last events come in the
// order of the commits, even when the server finishes a later utterance
// first (OpenAI does not promise the order of its transcripts across
// items, and an empty utterance finishes at once): turns then start in
// the order they were spoken. RecognizePartial's Text is the whole
// transcript so far; partials come as they arrive. Events is
// closed when the stream ends: after Close, or when the connection
// fails or the server ends the session (OpenAI and speaches end them
// after 30 minutes), then every committed utterance without its
// transcript has had a RecognizeError, and Err says why. A caller that
// keeps listening opens a new stream.
func (s *RealtimeStream) Events() <-chan RealtimeEvent { return s.events }

// Err is why the stream ended; nil while it runs and after Close.
func (s *RealtimeStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Utterance is the number of the utterance that appended audio goes to,
// so that a caller can tag it when speech starts, before it commits:
// some servers send transcripts of audio not yet committed.
func (s *RealtimeStream) Utterance() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

var errStreamClosed = sttErr(ErrCancelled, "the realtime stream is closed", nil)

// usable says why nothing more can be sent; s.mu is held.
func (s *RealtimeStream) usable() error {
	if s.err != nil {
		return s.err
	}
	select {
	case <-s.stop:
		return errStreamClosed
	default:
		return nil
	}
}

func (s *RealtimeStream) behind() *Error {
	return sttErr(ErrConnect, fmt.Sprintf("the connection to the recogniser is more than %d operations behind", realtimeBacklog), nil)
}

// Append adds mono 16-bit PCM at InputRate to the current utterance. It
// copies pcm and returns at once; the audio is resampled and sent by the
// stream's writer.
func (s *RealtimeStream) Append(pcm []int16) error {
	if len(pcm) == 0 {
		return nil
	}
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	if s.ops.Push(rtOp{kind: opAppend, pcm: slices.Clone(pcm)}, realtimeBacklog) {
		s.samples += len(pcm)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	err := s.behind()
	s.shutdown(err)
	return err
}

// Commit ends the current utterance and asks for its transcript; the
// next audio starts a new one. It returns the utterance's number, which
// its events carry.
func (s *RealtimeStream) Commit() (int, error) {
	return s.end(endCommit)
}

// Clear drops the current utterance (a false start, a cough): its audio
// is discarded by the server, and none of its events are delivered.
func (s *RealtimeStream) Clear() (int, error) {
	return s.end(endClear)
}

func (s *RealtimeStream) end(kind endKind) (int, error) {
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	utt := s.open
	op := opCommit
	if kind == endClear {
		op = opClear
	} else if time.Duration(s.samples)*time.Second/time.Duration(s.rate) < minCommit {
		kind, op = endEmpty, opClear
	}
	s.seq++
	id := fmt.Sprintf("alicia_%d", s.seq)
	if !s.ops.Push(rtOp{kind: op, eventID: id}, realtimeBacklog) {
		s.mu.Unlock()
		err := s.behind()
		s.shutdown(err)
		return 0, err
	}
	// Still under s.mu, so the reader cannot see the server's answer
	// before the record of what it answers.
	s.ends = append(s.ends, rtEnd{kind: kind, utt: utt, eventID: id})
	if kind == endClear {
		s.over[utt] = true
	} else {
		s.committed = append(s.committed, utt)
	}
	s.open++
	s.samples = 0
	s.mu.Unlock()
	return utt, nil
}

// Close ends the session and waits for the stream's goroutines.
func (s *RealtimeStream) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	s.shutdown(nil)
	s.wg.Wait()
	if s.unbind != nil {
		s.unbind()
	}
	return nil
}

// shutdown ends the stream once; err is nil for Close.
func (s *RealtimeStream) shutdown(err error) {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.stop)
		if err == nil {
			_ = s.conn.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		}
		_ = s.conn.Close()
	})
}

// write sends the operations in order. Audio goes through one resampler
// per utterance, closed at its end so that its last milliseconds are sent
// before the commit. Appends waiting together go out as one message of up
// to half a second, so that a writer that fell behind catches up in fewer,
// larger messages.
func (s *RealtimeStream) write() {
	defer s.wg.Done()
	var (
		out media.PCM16Sample
		rs  media.PCM16Writer
	)
	defer func() {
		if rs != nil {
			_ = rs.Close()
		}
	}()
	for {
		select {
		case <-s.ops.Ready():
		case <-s.stop:
			return
		}
		ops := s.ops.Take()
		for i, op := range ops {
			var err error
			switch op.kind {
			case opAppend:
				if rs == nil {
					rs = media.ResampleWriter(media.NewPCM16BufferWriter(&out, RealtimeRate), s.rate)
				}
				err = rs.WriteSample(op.pcm)
				more := i+1 < len(ops) && ops[i+1].kind == opAppend
				if err == nil && (!more || len(out) >= RealtimeRate/2) {
					err = s.sendAudio(&out)
				}
			case opCommit, opClear:
				if rs != nil {
					err = rs.Close()
					rs = nil
				}
				kind := "input_audio_buffer.commit"
				if op.kind == opClear {
					kind = "input_audio_buffer.clear"
					out = out[:0]
				} else if err == nil {
					err = s.sendAudio(&out)
				}
				if err == nil {
					err = s.send(map[string]string{"type": kind, "event_id": op.eventID})
				}
			}
			if err != nil {
				s.shutdown(sttErr(ErrConnect, "sending to the recogniser: "+err.Error(), err))
				return
			}
		}
	}
}

func (s *RealtimeStream) sendAudio(out *media.PCM16Sample) error {
	if len(*out) == 0 {
		return nil
	}
	msg := map[string]string{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(pcmBytes(*out))}
	*out = (*out)[:0]
	return s.send(msg)
}

// read turns server events into Events until the connection ends.
func (s *RealtimeStream) read() {
	defer s.wg.Done()
	defer close(s.events)
	for {
		ev, err := s.readEvent()
		var e *Error
		if errors.As(err, &e) && e.Kind == ErrProtocol {
			s.log.Warn("voice: unreadable event from the realtime recogniser", "err", err)
			continue
		}
		if err != nil {
			s.shutdown(sttErr(ErrConnect, "the connection to the recogniser ended: "+err.Error(), err))
			s.failPending()
			return
		}
		s.handle(ev)
	}
}

func (s *RealtimeStream) handle(ev serverEvent) {
	switch ev.Type {
	case "input_audio_buffer.committed":
		s.mu.Lock()
		utt := s.open // a commit the server made on its own
		if len(s.ends) > 0 && s.ends[0].kind == endCommit {
			utt = s.ends[0].utt
			s.ends = s.ends[1:]
		}
		s.mu.Unlock()
		if ev.ItemID != "" {
			s.items[ev.ItemID] = utt
		}
		s.awaiting = append(s.awaiting, utt)
	case "input_audio_buffer.cleared":
		s.mu.Lock()
		var end rtEnd
		if len(s.ends) > 0 && s.ends[0].kind != endCommit {
			end = s.ends[0]
			s.ends = s.ends[1:]
		}
		s.mu.Unlock()
		if end.kind == endEmpty {
			s.emit(end.utt, RecognizeEvent{Kind: RecognizeFinal})
		}
	case "conversation.item.input_audio_transcription.delta":
		utt := s.utterance(ev.ItemID)
		s.texts[utt] += ev.Delta
		s.emit(utt, RecognizeEvent{Kind: RecognizePartial, Text: strings.TrimSpace(s.texts[utt])})
	case "input_audio_buffer.partial_transcription":
		// speaches: the whole transcript so far, not a delta.
		utt := s.utterance(ev.ItemID)
		s.texts[utt] = ev.Transcript
		s.emit(utt, RecognizeEvent{Kind: RecognizePartial, Text: strings.TrimSpace(ev.Transcript)})
	case "conversation.item.input_audio_transcription.completed":
		utt := s.finished(ev.ItemID)
		s.emit(utt, RecognizeEvent{Kind: RecognizeFinal, Text: strings.TrimSpace(ev.Transcript)})
	case "conversation.item.input_audio_transcription.failed":
		utt := s.finished(ev.ItemID)
		s.emit(utt, RecognizeEvent{Kind: RecognizeError, Err: ev.Error.toError()})
	case "error":
		utt := s.blame(ev.Error)
		err := ev.Error.toError()
		if utt == 0 {
			s.log.Warn("voice: the realtime recogniser reported an error", "err", err)
		}
		s.emit(utt, RecognizeEvent{Kind: RecognizeError, Err: err})
	}
}

// utterance is the utterance a server item belongs to. An item not seen
// yet is the audio the server is buffering: the oldest commit or clear it
// has not answered, or else the current utterance.
func (s *RealtimeStream) utterance(item string) int {
	if utt, ok := s.items[item]; ok {
		return utt
	}
	s.mu.Lock()
	utt := s.open
	if len(s.ends) > 0 {
		utt = s.ends[0].utt
	}
	s.mu.Unlock()
	if item != "" {
		s.items[item] = utt
	}
	return utt
}

// finished forgets an item whose transcript came.
func (s *RealtimeStream) finished(item string) int {
	utt := s.utterance(item)
	delete(s.items, item)
	delete(s.texts, utt)
	s.awaiting = slices.DeleteFunc(s.awaiting, func(u int) bool { return u == utt })
	return utt
}

// blame finds the utterance an error event is about. OpenAI names the
// client event it refuses (event_id); speaches names none, so its kind
// tells: an invalid request refuses the oldest commit the server has not
// answered (a commit never gets both committed and a refusal), and any
// other error (a failed transcription) is about the oldest utterance
// waiting for its transcript, which would otherwise wait for ever. 0 when
// nothing fits: the error is the session's.
func (s *RealtimeStream) blame(e *serverError) int {
	if e == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.EventID != "" {
		for i, end := range s.ends {
			if end.eventID == e.EventID {
				s.ends = slices.Delete(s.ends, i, i+1)
				return end.utt
			}
		}
		return 0
	}
	if e.Type == "invalid_request_error" {
		if len(s.ends) > 0 && s.ends[0].kind == endCommit {
			utt := s.ends[0].utt
			s.ends = s.ends[1:]
			return utt
		}
		return 0
	}
	if len(s.awaiting) > 0 {
		utt := s.awaiting[0]
		s.awaiting = s.awaiting[1:]
		return utt
	}
	return 0
}

// failPending ends every utterance still waiting with the stream's
// error, so that no caller waits for a transcript that cannot come.
func (s *RealtimeStream) failPending() {
	select {
	case <-s.done:
		return
	default:
	}
	err := s.Err()
	if err == nil {
		err = errStreamClosed
	}
	s.mu.Lock()
	pending := slices.Clone(s.awaiting)
	for _, end := range s.ends {
		if end.kind != endClear {
			pending = append(pending, end.utt)
		}
	}
	s.ends = nil
	s.mu.Unlock()
	for _, utt := range pending {
		s.emit(utt, RecognizeEvent{Kind: RecognizeError, Err: err})
	}
}

// emit delivers ev unless its utterance is over (it had its last event,
// or was cleared), or nobody reads any more. A last event waits for those
// of older committed utterances.
func (s *RealtimeStream) emit(utt int, ev RecognizeEvent) {
	var out []RealtimeEvent
	s.mu.Lock()
	switch {
	case utt == 0 || ev.Kind == RecognizePartial && !s.over[utt]:
		out = append(out, RealtimeEvent{utt, ev})
	case s.over[utt]:
	case !slices.Contains(s.committed, utt): // a commit the server made itself
		s.over[utt] = true
		out = append(out, RealtimeEvent{utt, ev})
	default:
		s.over[utt] = true
		s.held[utt] = ev
		for len(s.committed) > 0 {
			first := s.committed[0]
			last, ok := s.held[first]
			if !ok {
				break
			}
			delete(s.held, first)
			s.committed = s.committed[1:]
			out = append(out, RealtimeEvent{first, last})
		}
	}
	s.mu.Unlock()
	for _, e := range out {
		select {
		case s.events <- e:
		case <-s.done:
			return
		}
	}
}

// Stream implements Recognizer over a connection of its own: it sends
// the whole utterance, commits it and relays its events. Breaking out
// early or cancelling ctx closes the connection.
func (r *RealtimeRecognizer) Stream(ctx context.Context, req *RecognizeRequest) iter.Seq[RecognizeEvent] {
	return func(yield func(RecognizeEvent) bool) {
		language := req.Language
		if language == "" {
			language = r.Language
		}
		rate := req.SampleRate
		if rate == 0 {
			rate = InputRate
		}
		s, err := r.open(ctx, rate, language, req.Prompt)
		if err != nil {
			yield(RecognizeEvent{Kind: RecognizeError, Err: err})
			return
		}
		defer s.Close()
		// A second at a time keeps messages small and the backlog far
		// from full for any utterance a person speaks.
		for a := req.Audio; len(a) > 0 && err == nil; a = a[min(len(a), rate):] {
			err = s.Append(a[:min(len(a), rate)])
		}
		utt := 0
		if err == nil {
			utt, err = s.Commit()
		}
		if err != nil {
			yield(RecognizeEvent{Kind: RecognizeError, Err: err})
			return
		}
		for ev := range s.Events() {
			if ev.Utterance != utt && ev.Utterance != 0 {
				continue
			}
			if !yield(ev.RecognizeEvent) || ev.Kind != RecognizePartial {
				return
			}
		}
		if err = s.Err(); err == nil {
			err = sttErr(ErrTruncated, "the session ended before the transcript", nil)
		}
		yield(RecognizeEvent{Kind: RecognizeError, Err: err})
	}
}
