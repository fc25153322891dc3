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
	// Tools run on the server (Builtins by default).
	Tools []Tool
	// MaxToolRounds bounds the model's tool calls in one turn (default 5).
	MaxToolRounds int
	Logger        *slog.Logger
}

// Conversation is the room.Handler of one session.
type Conversation struct {
	cfg Config
	s   *room.Session
	log *slog.Logger

	mu sync.Mutex
	// turns are the visible history: each user message with its answer.
	turns   []turnRecord
	handled map[string]bool // user message ids answered or being answered
	// edit: a ControlVariation "edit" waiting for the user message that
	// replaces its target.
	edit *pendingEdit
	// loaded: the turns stored before this session were read.
	loaded  bool
	cancel  context.CancelCauseFunc
	turnEnd chan struct{}
	// waiting: client tool requests awaiting their ToolUseResult.
	waiting map[string]chan *wire.ToolUseResult
}

func (c *Config) withDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Tools == nil {
		c.Tools = Builtins()
	}
	if c.MaxToolRounds <= 0 {
		c.MaxToolRounds = 5
	}
}

// New returns the handler factory room.Agent takes.
func New(cfg Config) func(*room.Session) room.Handler {
	cfg.withDefaults()
	return func(s *room.Session) room.Handler {
		return &Conversation{cfg: cfg, s: s, log: cfg.Logger.With("conversation", s.ID), handled: map[string]bool{},
			waiting: map[string]chan *wire.ToolUseResult{}}
	}
}

// Features are the server's features in its Configuration.
func (c *Conversation) Features() []string {
	return []string{wire.FeatureStreaming, wire.FeaturePartialReasoning}
}

var errStopped = fmt.Errorf("stopped by the user")

// turnRecord is one answered user message, as the model sees it again.
type turnRecord struct {
	user      llm.Message
	encrypted []llm.Message // an AG-UI backend's reasoning values
	answerID  string
	answer    string
}

type pendingEdit struct {
	target string
	from   string
	until  time.Time
}

// editWait is how long an edit waits for its replacement message.
const editWait = 5 * time.Second

// spec says what a turn answers.
type spec struct {
	user      *wire.UserMessage
	from      string
	received  time.Time
	variantOf string // regenerate: the earlier answer
	prefix    string // continue: the answer so far
	replaces  int    // index of the turn it rewrites, or -1 for a new one
}

// loadHistory reads the conversation's earlier turns from storage the
// first time a session needs them: after a restart, a takeover, or turns
// taken over AG-UI.
func (c *Conversation) loadHistory(ctx context.Context) {
	c.mu.Lock()
	loaded := c.loaded
	c.loaded = true
	c.mu.Unlock()
	if loaded {
		return
	}
	entries, err := c.s.Store().History(ctx, c.s.ID)
	if err != nil {
		return // a new conversation
	}
	var turns []turnRecord
	for _, e := range entries {
		switch {
		case e.Role == "user" && e.Status != storage.StatusSuperseded:
			turns = append(turns, turnRecord{user: llm.Message{ID: e.ID, Role: llm.RoleUser, Content: e.Content}})
		case e.Role == "assistant" && e.VariantOf == "" && len(turns) > 0 && turns[len(turns)-1].user.ID == e.PreviousID &&
			(e.Status == storage.StatusComplete || e.Status == storage.StatusStopped):
			turns[len(turns)-1].answerID, turns[len(turns)-1].answer = e.ID, e.Content
		}
	}
	c.mu.Lock()
	if len(c.turns) == 0 {
		c.turns = turns
	}
	c.mu.Unlock()
}

func (c *Conversation) historyBefore(i int) []llm.Message {
	var out []llm.Message
	for _, t := range c.turns[:i] {
		out = append(out, t.user)
		out = append(out, t.encrypted...)
		if t.answer != "" {
			out = append(out, llm.Message{ID: t.answerID, Role: llm.RoleAssistant, Content: t.answer})
		}
	}
	return out
}

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
		c.mu.Lock()
		edit := c.edit
		c.edit = nil
		c.mu.Unlock()
		if edit != nil && edit.from == in.From && time.Now().Before(edit.until) {
			c.editTurn(edit.target, b, in.From, in.Received)
			return
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
		c.startTurn(spec{user: b, from: in.From, received: in.Received, replaces: -1})
	case *wire.ControlVariation:
		c.vary(s, in, b)
	case *wire.ToolUseResult:
		c.mu.Lock()
		ch := c.waiting[b.RequestID]
		delete(c.waiting, b.RequestID)
		c.mu.Unlock()
		if ch == nil {
			s.SendError(wire.CodeToolNotFound, true, fmt.Sprintf("no tool request %q is waiting for a result", b.RequestID), b.RequestID, in.From)
			return
		}
		ch <- b
	case *wire.ControlStop:
		// Speech is the voice stage's to stop; there is none yet, so a
		// speech-only stop has nothing to do. Generation and all stop the
		// model.
		notes := "nothing to stop"
		if b.StopType != wire.StopSpeech && c.stop() {
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

func (c *Conversation) startTurn(sp spec) {
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
		c.run(ctx, sp)
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

// run is one turn: model rounds until the model answers without calling
// a tool, or the bound of rounds is reached.
func (c *Conversation) run(ctx context.Context, sp spec) {
	s := c.s
	m, from := sp.user, sp.from
	store := s.Store()
	assistantID := wire.NewID("am")
	now := time.Now()
	if sp.variantOf == "" && sp.prefix == "" {
		store.SaveMessage(storage.Message{ID: m.ID, ConversationID: s.ID, PreviousID: m.PreviousID, Role: "user", Content: m.Content, Status: storage.StatusComplete, CreatedAt: sp.received})
	}
	store.SaveMessage(storage.Message{ID: assistantID, ConversationID: s.ID, PreviousID: m.ID, Role: "assistant", Status: storage.StatusStreaming, VariantOf: sp.variantOf, CreatedAt: now})

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

	clientTools := c.clientTools(from)
	c.loadHistory(ctx)
	c.mu.Lock()
	upTo := len(c.turns)
	if sp.replaces >= 0 {
		upTo = sp.replaces
	}
	messages := append(c.historyBefore(upTo), llm.Message{ID: m.ID, Role: llm.RoleUser, Content: m.Content})
	c.mu.Unlock()
	if sp.prefix != "" {
		// Continue: the model sees its cut answer and is asked to go on.
		messages = append(messages, llm.Message{Role: llm.RoleAssistant, Content: sp.prefix},
			llm.Message{Role: llm.RoleUser, Content: "Continue your previous answer exactly where it stopped, without repeating it."})
	}
	req := &llm.Request{ConversationID: s.ID, System: c.cfg.System, Thinking: c.cfg.Thinking, Tools: c.toolDefs(clientTools), Messages: messages}

	a := &answer{s: s, assistantID: assistantID, userID: m.ID}
	failure := c.cfg.rounds(ctx, req, chain, deliver, turnHooks{
		text: a.write,
		tools: func(calls []llm.ToolCall) ([]llm.Message, bool) {
			return c.runTools(ctx, calls, clientTools, from, assistantID), false
		},
	})
	chain.End(time.Now())
	stopped := context.Cause(ctx) == errStopped
	a.finish(stopped)

	status := storage.StatusComplete
	switch {
	case stopped:
		status = storage.StatusStopped
	case failure != nil:
		status = storage.StatusFailed
		c.log.Warn("turn failed", "err", failure)
		s.SendError(wire.CodeServiceUnavailable, true, "The model failed while answering: "+plainReason(failure)+". What was said so far is kept.", m.ID)
	case a.text.Len() == 0:
		s.SendError(wire.CodeServiceUnavailable, true, "The model returned no answer.", m.ID)
	}
	content := a.text.String()
	store.SaveMessage(storage.Message{ID: assistantID, ConversationID: s.ID, PreviousID: m.ID, Role: "assistant", Content: content, Status: status, VariantOf: sp.variantOf, CreatedAt: now})
	rec := turnRecord{user: llm.Message{ID: m.ID, Role: llm.RoleUser, Content: m.Content}, encrypted: encrypted, answerID: assistantID, answer: sp.prefix + content}
	c.mu.Lock()
	if sp.replaces >= 0 && sp.replaces < len(c.turns) {
		c.turns = append(c.turns[:sp.replaces], rec)
	} else {
		c.turns = append(c.turns, rec)
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
