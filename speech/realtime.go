package speech

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/alicia-voice/alicia/internal/failover"
	"github.com/alicia-voice/alicia/internal/provider"
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

	servers servers
}

// Servers is the pool the recogniser serves from: ProviderConfig's
// servers, or URL alone.
func (r *RealtimeRecognizer) Servers() *failover.Pool { return r.servers.get("stt", r.URL, r.Logger) }

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

// Open connects and configures a session. ctx bounds the set-up and the
// stream's life: cancelling it ends the stream as a failure would.
func (r *RealtimeRecognizer) Open(ctx context.Context) (*RealtimeStream, error) {
	return r.open(ctx, RecognitionRate, r.Language, "")
}

func (r *RealtimeRecognizer) open(ctx context.Context, rate int, language, prompt string) (*RealtimeStream, error) {
	var s *RealtimeStream
	err := r.Servers().Do(ctx, func(ctx context.Context, a failover.Attempt) error {
		var err error
		s, err = r.openOn(ctx, a, rate, language, prompt)
		return err
	})
	return s, err
}

// openOn opens a session on one server. Nothing is transcribed before
// the session is set up, so any failure to set it up (but the caller's
// cancellation) is the server's: Down, and the next server is asked. Set
// up within the attempt's first-byte timeout, or realtimeSetup.
func (r *RealtimeRecognizer) openOn(ctx context.Context, a failover.Attempt, rate int, language, prompt string) (*RealtimeStream, error) {
	endpoint, err := r.endpoint(a.Server)
	if err != nil {
		return nil, sttErr(provider.ErrConnect, err.Error(), err)
	}
	header := http.Header{}
	if r.APIKey != "" {
		header.Set("Authorization", "Bearer "+r.APIKey)
	}
	dialer := r.Dialer
	if dialer == nil {
		dialer = websocket.DefaultDialer
	}
	limit := realtimeSetup
	if a.FirstByte > 0 {
		limit = min(limit, a.FirstByte)
	}
	setup, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	conn, resp, err := dialer.DialContext(setup, endpoint, header)
	if err != nil {
		if resp != nil && resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, statusErr(httpErr("stt", resp))
		}
		return nil, setupErr(ctx, setup, limit, err)
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
		return nil, setupErr(ctx, setup, limit, err)
	}
	s.wg.Add(2)
	go s.read()
	go s.write()
	s.unbind = context.AfterFunc(ctx, func() {
		s.shutdown(&provider.Error{Service: "stt", Kind: provider.ErrCancelled, Cause: ctx.Err()})
	})
	return s, nil
}

// setupErr says why a session could not be set up: the caller's context
// (not the server's fault), or the server, in time or not (Down).
func setupErr(ctx, setup context.Context, limit time.Duration, err error) error {
	var e *provider.Error
	switch {
	case ctx.Err() != nil:
		return &provider.Error{Service: "stt", Kind: provider.ErrCancelled, Cause: ctx.Err()}
	case setup.Err() != nil:
		return failover.Down(sttErr(provider.ErrConnect, fmt.Sprintf("no transcription session within %v", limit), err))
	case errors.As(err, &e):
		return failover.Down(e)
	}
	return failover.Down(sttErr(provider.ErrConnect, err.Error(), err))
}

func (r *RealtimeRecognizer) endpoint(base string) (string, error) {
	u, err := provider.WebSocketURL(strings.TrimSuffix(base, "/"))
	if err != nil {
		return "", fmt.Errorf("the recogniser's URL: %w", err)
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
			rate = RecognitionRate
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
			err = sttErr(provider.ErrTruncated, "the session ended before the transcript", nil)
		}
		yield(RecognizeEvent{Kind: RecognizeError, Err: err})
	}
}
