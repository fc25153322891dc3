// Package storage keeps conversations, messages, reasoning steps, user
// preferences and the log of sent envelopes: in Postgres when a database
// URL is configured, in memory otherwise, behind the same interface.
//
// Writes never make a turn wait: Save* methods queue the record and
// return. The Postgres writer drains the queue in batches (one transaction
// per batch), retries with backoff while the database is unreachable, and
// writes idempotently, so a retried batch never duplicates a row. The
// queue never drops a record. Past its soft limit Saturated reports true,
// and callers apply back-pressure by refusing new turns (the session
// answers error 504) until the writer catches up; records of turns already
// under way are still accepted.
package storage

import (
	"context"
	"errors"
	"time"

	"github.com/alicia-voice/alicia/reasoning"
)

// ReasoningMode says what is stored of the model's reasoning.
type ReasoningMode string

const (
	// ReasoningPlain stores steps as text (the default).
	ReasoningPlain ReasoningMode = "plain"
	// ReasoningEncrypted stores steps sealed with AES-GCM under a key from
	// configuration, so that a database dump holds no plaintext
	// reasoning.
	ReasoningEncrypted ReasoningMode = "encrypted"
	// ReasoningOff stores no steps at all (zero data retention); reasoning
	// envelopes are left out of the durable log too.
	ReasoningOff ReasoningMode = "off"
)

// Conversation is one LiveKit room's conversation.
type Conversation struct {
	ID        string
	Owner     string
	CreatedAt time.Time
}

// Message statuses.
const (
	StatusStreaming  = "streaming"
	StatusComplete   = "complete"
	StatusStopped    = "stopped"
	StatusFailed     = "failed"
	StatusSuperseded = "superseded"
	// StatusInterrupted: the process streaming the answer died; the bot
	// that took the conversation over found it unfinished.
	StatusInterrupted = "interrupted"
)

// Message is a user or assistant message. Saving a message again with the
// same ID updates its content and status (an answer as it completes).
type Message struct {
	ID             string
	ConversationID string
	PreviousID     string
	Role           string // "user" or "assistant"
	Content        string
	Status         string
	VariantOf      string
	ReplacedByID   string
	CreatedAt      time.Time

	// Author is the identity of the participant who wrote or said a user
	// message, so that a conversation with several people keeps who said
	// what; empty for the assistant's. Saving the message again without
	// one keeps the one stored.
	Author string
}

// Envelope is one sent server envelope.
type Envelope struct {
	ConversationID string
	StanzaID       int32
	Payload        []byte
	// To lists the identities it was addressed to; nil means everyone.
	To []string
	// Reasoning marks a ReasoningStep envelope, which the reasoning mode
	// encrypts or leaves out.
	Reasoning bool
	SentAt    time.Time
}

// Entry is a message with its reasoning steps, as the history endpoint
// returns it.
type Entry struct {
	Message
	Steps []reasoning.Step
}

// ErrNotFound is returned for an unknown conversation.
var ErrNotFound = errors.New("storage: not found")

// Store is what the rest of Alicia uses.
type Store interface {
	reasoning.Preferences

	SaveConversation(Conversation)
	SaveMessage(Message)
	// SaveStep stores a final step once; partial steps are never saved.
	SaveStep(reasoning.Step)
	SaveEnvelope(Envelope)

	Conversation(ctx context.Context, id string) (Conversation, error)
	// History returns a conversation's messages in order, each with its
	// reasoning steps in order.
	History(ctx context.Context, conversationID string) ([]Entry, error)
	// HistoryVersion changes when the conversation's messages or steps
	// may have changed other than through this process's own engine (ok
	// false: it cannot tell, read History again).
	HistoryVersion(conversationID string) (v uint64, ok bool)
	// Envelopes returns the envelopes after stanza -after (after is an
	// absolute value, as Configuration.lastSequenceSeen), in order, that
	// were addressed to identity or to everyone.
	Envelopes(ctx context.Context, conversationID string, after int32, identity string) ([]Envelope, error)
	// ReserveStanzas reserves the next n server stanza magnitudes of a
	// conversation and returns the first. It writes synchronously: a
	// number reserved is never handed out again, by this process or
	// another taking the conversation over.
	ReserveStanzas(ctx context.Context, conversationID string, n int32) (int32, error)

	// Saturated reports a write queue past its limit: refuse new work.
	Saturated() bool
	// Durable reports whether records survive a restart.
	Durable() bool
	// Close flushes what is queued, until ctx ends.
	Close(ctx context.Context) error
}

func addressedTo(e *Envelope, identity string) bool {
	if e.To == nil {
		return true
	}
	for _, id := range e.To {
		if id == identity {
			return true
		}
	}
	return false
}
