package reasoning

import (
	"context"
	"sync"
)

// Preferences remembers each user's mode, keyed by the identity in the
// user's LiveKit token (or AG-UI bearer token). storage/ provides a
// durable implementation; Memory serves when there is no database.
type Preferences interface {
	// Mode is ModeUnset for a user who never chose.
	Mode(ctx context.Context, identity string) (Mode, error)
	SetMode(ctx context.Context, identity string, m Mode) error
}

// Memory keeps preferences in this process.
type Memory struct {
	mu    sync.RWMutex
	modes map[string]Mode
}

// NewMemory returns an empty in-memory store: everyone starts unset.
func NewMemory() *Memory { return &Memory{modes: map[string]Mode{}} }

func (m *Memory) Mode(_ context.Context, identity string) (Mode, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if mode, ok := m.modes[identity]; ok {
		return mode, nil
	}
	return ModeUnset, nil
}

func (m *Memory) SetMode(_ context.Context, identity string, mode Mode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.modes[identity] = mode
	return nil
}
