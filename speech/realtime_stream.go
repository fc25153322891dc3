package speech

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/alicia-voice/alicia/internal/provider"
	"github.com/alicia-voice/alicia/internal/queue"
)

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

var errStreamClosed = sttErr(provider.ErrCancelled, "the realtime stream is closed", nil)

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

func (s *RealtimeStream) behind() *provider.Error {
	return sttErr(provider.ErrConnect, fmt.Sprintf("the connection to the recogniser is more than %d operations behind", realtimeBacklog), nil)
}

// Append adds mono 16-bit PCM at RecognitionRate to the current utterance. It
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
