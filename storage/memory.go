package storage

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/reasoning"
)

// maxMemoryEnvelopes bounds the envelopes an in-memory store keeps per
// conversation; a resume beyond them gets "not recoverable".
const maxMemoryEnvelopes = 10_000

// Memory is the store used without a database: the same interface, gone
// with the process.
type Memory struct {
	*reasoning.Memory
	mode ReasoningMode

	mu            sync.RWMutex
	conversations map[string]Conversation
	messages      map[string][]Message // by conversation, in order
	steps         map[string][]reasoning.Step
	envelopes     map[string][]Envelope
	stanzas       map[string]int32  // last reserved stanza magnitude
	versions      map[string]uint64 // writes to each conversation's messages and steps
}

// NewMemory returns an empty in-memory store.
func NewMemory(mode ReasoningMode) *Memory {
	return &Memory{
		Memory: reasoning.NewMemory(), mode: mode,
		conversations: map[string]Conversation{}, messages: map[string][]Message{},
		steps: map[string][]reasoning.Step{}, envelopes: map[string][]Envelope{},
		stanzas: map[string]int32{}, versions: map[string]uint64{},
	}
}

func (m *Memory) SaveConversation(c Conversation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.conversations[c.ID]; !ok {
		m.conversations[c.ID] = c
	}
}

func (m *Memory) SaveMessage(msg Message) {
	// The same defaults as the database's.
	if msg.CreatedAt.IsZero() {
		msg.CreatedAt = time.Now()
	}
	if msg.Status == "" {
		msg.Status = StatusComplete
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.versions[msg.ConversationID]++
	list := m.messages[msg.ConversationID]
	for i := range list {
		if list[i].ID == msg.ID {
			msg.CreatedAt = list[i].CreatedAt
			if msg.Author == "" {
				msg.Author = list[i].Author
			}
			list[i] = msg
			return
		}
	}
	m.messages[msg.ConversationID] = append(list, msg)
}

func (m *Memory) SaveStep(s reasoning.Step) {
	if m.mode == ReasoningOff {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.versions[s.ConversationID]++
	for _, old := range m.steps[s.ConversationID] {
		if old.ID == s.ID {
			return
		}
	}
	m.steps[s.ConversationID] = append(m.steps[s.ConversationID], s)
}

func (m *Memory) SaveEnvelope(e Envelope) {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := append(m.envelopes[e.ConversationID], e)
	if len(list) > maxMemoryEnvelopes {
		list = slices.Delete(list, 0, len(list)-maxMemoryEnvelopes)
	}
	m.envelopes[e.ConversationID] = list
}

func (m *Memory) Conversation(_ context.Context, id string) (Conversation, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.conversations[id]
	if !ok {
		return Conversation{}, ErrNotFound
	}
	return c, nil
}

func (m *Memory) History(_ context.Context, conversationID string) ([]Entry, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if _, ok := m.conversations[conversationID]; !ok {
		return nil, ErrNotFound
	}
	var out []Entry
	for _, msg := range m.messages[conversationID] {
		e := Entry{Message: msg}
		for _, s := range m.steps[conversationID] {
			if s.MessageID == msg.ID {
				e.Steps = append(e.Steps, s)
			}
		}
		slices.SortFunc(e.Steps, func(a, b reasoning.Step) int { return int(a.Index - b.Index) })
		out = append(out, e)
	}
	return out, nil
}

func (m *Memory) Envelopes(_ context.Context, conversationID string, after int32, identity string) ([]Envelope, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Envelope
	for _, e := range m.envelopes[conversationID] {
		if -e.StanzaID > after && addressedTo(&e, identity) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *Memory) ReserveStanzas(_ context.Context, conversationID string, n int32) (int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first := m.stanzas[conversationID] + 1
	m.stanzas[conversationID] += n
	return first, nil
}

func (m *Memory) Saturated() bool             { return false }
func (m *Memory) Durable() bool               { return false }
func (m *Memory) Close(context.Context) error { return nil }
