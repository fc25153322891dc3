// Package pipeline runs a conversation's turns: a user message goes to
// the model; its reasoning becomes steps for those who want them; its
// answer goes out as a StartAnswer and sentences (speech will hang off the
// sentence stream), or as one AssistantMessage to clients that did not
// negotiate streaming.
package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/pipeline/sentence"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// Config is what every conversation shares.
type Config struct {
	LLM      llm.Client
	System   string
	Thinking bool
	Logger   *slog.Logger
}

// Conversation is the room.Handler of one session.
type Conversation struct {
	cfg Config
	s   *room.Session
	log *slog.Logger

	mu      sync.Mutex
	history []llm.Message
	handled map[string]bool // user message ids answered or being answered
	cancel  context.CancelCauseFunc
	turnEnd chan struct{}
}

// New returns the handler factory room.Agent takes.
func New(cfg Config) func(*room.Session) room.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return func(s *room.Session) room.Handler {
		return &Conversation{cfg: cfg, s: s, log: cfg.Logger.With("conversation", s.ID), handled: map[string]bool{}}
	}
}

// Features are the server's features in its Configuration.
func (c *Conversation) Features() []string {
	return []string{wire.FeatureStreaming, wire.FeaturePartialReasoning}
}

var errStopped = fmt.Errorf("stopped by the user")

// Handle takes one client envelope; turns run in their own goroutine.
func (c *Conversation) Handle(_ context.Context, s *room.Session, in room.Inbound) {
	switch b := in.Envelope.Body.(type) {
	case *wire.UserMessage:
		c.mu.Lock()
		dup := c.handled[b.ID]
		c.handled[b.ID] = true
		c.mu.Unlock()
		s.Send(&wire.Acknowledgement{ConversationID: s.ID, AcknowledgedStanzaID: in.Envelope.StanzaID, AcknowledgedMessageID: b.ID}, in.From)
		if dup {
			return // acknowledged again, not answered twice
		}
		if s.Store().Saturated() {
			// Back-pressure: storage cannot keep up, so no new work until
			// it drains; the user may send the message again.
			c.mu.Lock()
			delete(c.handled, b.ID)
			c.mu.Unlock()
			s.SendError(wire.CodeQueueFull, true, "The server is busy saving earlier conversations; send your message again in a moment.", b.ID, in.From)
			return
		}
		c.startTurn(b, in.Received)
	case *wire.ControlStop:
		stopped := c.stop()
		notes := "nothing to stop"
		if stopped {
			notes = "stopped"
		}
		s.Send(&wire.Acknowledgement{ConversationID: s.ID, AcknowledgedStanzaID: in.Envelope.StanzaID, AcknowledgedMessageID: b.TargetID, Notes: notes}, in.From)
	case *wire.Commentary:
		s.Send(&wire.Acknowledgement{ConversationID: s.ID, AcknowledgedStanzaID: in.Envelope.StanzaID, AcknowledgedMessageID: b.ID}, in.From)
	default:
		s.SendError(wire.CodeInvalidState, true, fmt.Sprintf("%s is not handled by this server yet", in.Envelope.Type()), "", in.From)
	}
}

// stop cancels the running turn and waits until its last packet is out.
func (c *Conversation) stop() bool {
	c.mu.Lock()
	cancel, done := c.cancel, c.turnEnd
	c.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel(errStopped)
	<-done
	return true
}

func (c *Conversation) startTurn(m *wire.UserMessage, received time.Time) {
	// One turn at a time: a new question stops the previous answer.
	c.stop()
	ctx, cancel := context.WithCancelCause(c.s.Context())
	done := make(chan struct{})
	c.mu.Lock()
	c.cancel, c.turnEnd = cancel, done
	c.mu.Unlock()
	c.s.Go(func(context.Context) {
		defer close(done)
		defer cancel(nil)
		c.run(ctx, m, received)
		c.mu.Lock()
		if c.turnEnd == done {
			c.cancel, c.turnEnd = nil, nil
		}
		c.mu.Unlock()
	})
}

// audienceSplit separates the room's users by answer form.
func (c *Conversation) audienceSplit() (streaming, whole []string) {
	for _, v := range c.s.Audience().Viewers() {
		if slices.Contains(c.s.ClientFeatures(v.Identity), wire.FeatureStreaming) {
			streaming = append(streaming, v.Identity)
		} else {
			whole = append(whole, v.Identity)
		}
	}
	return streaming, whole
}

// run is one turn.
func (c *Conversation) run(ctx context.Context, m *wire.UserMessage, received time.Time) {
	s := c.s
	store := s.Store()
	assistantID := wire.NewID("am")
	now := time.Now()
	store.SaveMessage(storage.Message{ID: m.ID, ConversationID: s.ID, PreviousID: m.PreviousID, Role: "user", Content: m.Content, Status: storage.StatusComplete, CreatedAt: received})
	store.SaveMessage(storage.Message{ID: assistantID, ConversationID: s.ID, PreviousID: m.ID, Role: "assistant", Status: storage.StatusStreaming, CreatedAt: now})

	deliver := reasoning.NewDeliverer(s.Audience().Viewers, func(d reasoning.Delivery) { s.Send(d.Step, d.To...) })
	// An AG-UI backend's encrypted reasoning goes back to it on the next
	// turn, under its own message id; other backends never see it.
	var encrypted []llm.Message
	chain := reasoning.NewChain(s.ID, m.ID, assistantID, deliver, reasoning.OnSealed(func(st reasoning.Step) {
		store.SaveStep(st)
		if st.EncryptedValue != "" && st.SourceMessageID != "" {
			encrypted = append(encrypted, llm.Message{ID: st.SourceMessageID, Role: llm.RoleReasoning, EncryptedValue: st.EncryptedValue})
		}
	}))

	c.mu.Lock()
	req := &llm.Request{ConversationID: s.ID, System: c.cfg.System, Thinking: c.cfg.Thinking,
		Messages: append(slices.Clone(c.history), llm.Message{ID: m.ID, Role: llm.RoleUser, Content: m.Content})}
	c.mu.Unlock()

	events := make(chan llm.Event, 64)
	go func() {
		// Ends when the stream does, which cancelling ctx brings about;
		// the loop below reads until then.
		defer close(events)
		for ev := range c.cfg.LLM.Stream(ctx, req) {
			events <- ev
		}
	}()

	var (
		answer    strings.Builder
		split     sentence.Splitter
		started   bool
		sequence  int32
		streaming []string
		whole     []string
		failure   error
	)
	begin := func() {
		if !started {
			started = true
			streaming, whole = c.audienceSplit()
			if len(streaming) > 0 {
				s.Send(&wire.StartAnswer{ID: assistantID, PreviousID: m.ID, ConversationID: s.ID, AnswerType: wire.AnswerText}, streaming...)
			}
		}
	}
	sendSentences := func(sentences []string, final bool) {
		if len(sentences) == 0 && !final {
			return
		}
		begin()
		if final && len(sentences) == 0 {
			sentences = []string{""} // the answer ended on a sentence already sent
		}
		for i, text := range sentences {
			sequence++
			if len(streaming) > 0 {
				s.Send(&wire.AssistantSentence{ID: wire.NewID("as"), PreviousID: assistantID, ConversationID: s.ID,
					Sequence: sequence, Text: text, IsFinal: final && i == len(sentences)-1}, streaming...)
			}
		}
	}
	poll := time.NewTimer(time.Hour)
	defer poll.Stop()
	var pollC <-chan time.Time
loop:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				break loop
			}
			chain.Feed(ev, time.Now())
			switch ev.Kind {
			case llm.EventText:
				answer.WriteString(ev.Text)
				sendSentences(split.Write(ev.Text), false)
			case llm.EventToolCall:
				failure = fmt.Errorf("the model asked for the tool %q, and tools are not available on this server yet", ev.ToolCall.Name)
			case llm.EventError:
				failure = ev.Err
			}
		case <-pollC:
		}
		// Partial reasoning updates that waited out their interval.
		pollC = nil
		if next := deliver.Poll(time.Now()); !next.IsZero() {
			poll.Reset(time.Until(next))
			pollC = poll.C
		}
	}
	chain.End(time.Now())
	stopped := context.Cause(ctx) == errStopped
	if answer.Len() > 0 {
		sendSentences(split.Flush(), true)
	}
	if len(whole) > 0 {
		state := storage.StatusComplete
		if stopped {
			state = storage.StatusStopped
		}
		s.Send(&wire.AssistantMessage{ID: assistantID, PreviousID: m.ID, ConversationID: s.ID, Content: answer.String(),
			Timestamp: time.Now().UnixMilli(), State: state}, whole...)
	}
	status := storage.StatusComplete
	switch {
	case stopped:
		status = storage.StatusStopped
	case failure != nil:
		status = storage.StatusFailed
		c.log.Warn("turn failed", "err", failure)
		s.SendError(wire.CodeServiceUnavailable, true, "The model failed while answering: "+plainReason(failure)+". What was said so far is kept.", m.ID)
	case answer.Len() == 0:
		s.SendError(wire.CodeServiceUnavailable, true, "The model returned no answer.", m.ID)
	}
	store.SaveMessage(storage.Message{ID: assistantID, ConversationID: s.ID, PreviousID: m.ID, Role: "assistant", Content: answer.String(), Status: status, CreatedAt: now})
	c.mu.Lock()
	c.history = append(c.history, llm.Message{ID: m.ID, Role: llm.RoleUser, Content: m.Content})
	c.history = append(c.history, encrypted...)
	if answer.Len() > 0 {
		c.history = append(c.history, llm.Message{ID: assistantID, Role: llm.RoleAssistant, Content: answer.String()})
	}
	c.mu.Unlock()
}

// plainReason words a model failure for a user.
func plainReason(err error) string {
	if e, ok := llm.AsError(err); ok {
		if e.Message != "" {
			return strings.TrimSuffix(e.Message, ".")
		}
		return string(e.Kind)
	}
	return err.Error()
}
