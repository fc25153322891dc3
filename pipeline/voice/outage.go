package voice

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/alicia-voice/alicia/internal/failover"
)

// SpeechProblem is a speech service the stage cannot use: every
// recogniser or every synthesiser is down.
type SpeechProblem struct {
	// Service is "stt" or "tts".
	Service string
	Message string
}

// outages remembers which outage of each speech service the stage has
// told its participants of, so that they hear of each once and not with
// every utterance or sentence it fails.
type outages struct {
	mu   sync.Mutex
	told map[string]uint64
}

// speechFailed tells the room, once per outage, that a speech service
// is down; other failures are the log's.
func (s *Stage) speechFailed(ctx context.Context, service string, err error) {
	var o *failover.Outage
	if !errors.As(err, &o) {
		return
	}
	s.outages.mu.Lock()
	first := s.outages.told[service] != o.Epoch
	if first {
		if s.outages.told == nil {
			s.outages.told = map[string]uint64{}
		}
		s.outages.told[service] = o.Epoch
	}
	s.outages.mu.Unlock()
	if !first {
		return
	}
	what := map[string]string{"stt": "Speech recognition", "tts": "Speech synthesis"}[service]
	s.room.SpeechProblem(ctx, SpeechProblem{Service: service,
		Message: fmt.Sprintf("%s is unavailable: every server is down. Typed messages are still answered.", what)})
}
