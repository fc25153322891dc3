package pipeline

import (
	"context"
	"time"

	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// Outbox sends typed bodies into a conversation, in the order of the
// calls: to the given identities, or to everyone when none is given. It
// must not block on the network: a face queues and sends from its own
// goroutine.
type Outbox interface {
	Send(body wire.Body, to ...string)
}

// Member is a participant of a conversation as the engine sees it: what
// its client announced it can display and the tools it runs itself. The
// face passes these on as data and decides nothing from them.
type Member struct {
	Identity string
	Features wire.Features
	Tools    []wire.ClientTool
	// ReasoningStreams: the client reads reasoning as text streams
	// (StepStreamer) at its user's preference, whatever Features say.
	ReasoningStreams bool
}

// Roster says who is in a conversation now.
type Roster interface {
	Members() []Member
}

// Face is one transport's side of a conversation: LiveKit's data channel
// (room.Session), an AG-UI run over SSE, or a test's in-memory fake.
type Face interface {
	Outbox
	Roster
}

// StepRenderer is implemented by a face that renders the reasoning chain
// itself (AG-UI's reasoning events) instead of receiving ReasoningStep
// bodies chosen by each member's preference.
type StepRenderer interface {
	Steps() reasoning.Listener
}

// Store is the storage the engine uses.
type Store interface {
	reasoning.Preferences
	SaveConversation(storage.Conversation)
	SaveMessage(storage.Message)
	SaveStep(reasoning.Step)
	Conversation(ctx context.Context, id string) (storage.Conversation, error)
	History(ctx context.Context, conversationID string) ([]storage.Entry, error)
	// HistoryVersion says when History must be read again (storage.Store).
	HistoryVersion(conversationID string) (v uint64, ok bool)
	Saturated() bool
}

// Inbound is one client envelope a face hands to the engine, after its
// own checks (decoding, numbering, duplicates).
type Inbound struct {
	From     string
	StanzaID int32
	Body     wire.Body
	Received time.Time
}

// DeltaRenderer is implemented by a face that streams the answer's text
// as it comes (AG-UI's text events) rather than as StartAnswer and
// sentences; the turn still yields its sentences to speech.
type DeltaRenderer interface {
	Delta(answerID, delta string)
}

// Speaker speaks a conversation's answers: the voice stage. Speak is
// called with every turn the conversation starts, on the conversation's
// goroutine, and must not block.
type Speaker interface {
	Speak(t *Turn)
}
