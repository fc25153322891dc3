package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/internal/queue"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/wire"
)

// Config is what every conversation shares.
type Config struct {
	LLM      llm.Client
	System   string
	Thinking bool
	// ThinkingPolicy, when set, says how typed and spoken turns think
	// (and within what budget) in place of Thinking.
	ThinkingPolicy *ThinkingPolicy
	// Tools run on the server (Builtins by default).
	Tools []Tool
	// MaxToolRounds bounds the model's tool calls in one turn (default 5).
	MaxToolRounds int
	// ReasoningDefault is the show-reasoning mode of a user who never
	// chose one (ALICIA_REASONING_DEFAULT; DefaultReasoningMode if unset).
	ReasoningDefault reasoning.Mode
	// Telemetry hears every turn's timings when it is over (nil: none).
	Telemetry TurnObserver
	Logger    *slog.Logger
}

// DefaultReasoningMode is Config.ReasoningDefault's default.
const DefaultReasoningMode = reasoning.ModeFull

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
	if !c.ReasoningDefault.Valid() {
		c.ReasoningDefault = DefaultReasoningMode
	}
}

// Engine runs the conversations of one process, whichever face they come
// through: a conversation open on two faces (a LiveKit room and an AG-UI
// run on its thread) is one Conversation, whose turns take their turn.
type Engine struct {
	cfg   Config
	store Store

	mu    sync.Mutex
	convs map[string]*Conversation
}

// NewEngine returns the engine; it starts nothing until a face opens a
// conversation.
func NewEngine(cfg Config, store Store) *Engine {
	cfg.withDefaults()
	return &Engine{cfg: cfg, store: store, convs: map[string]*Conversation{}}
}

// Features are the server's own features stated in its Configuration.
func (c *Conversation) Features() []string {
	return []string{wire.FeatureStreaming, wire.FeaturePartialReasoning}
}

// Open returns the conversation id, starting it if no face has it open in
// this process. Every Open is paired with a Close.
func (e *Engine) Open(id string) *Conversation {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.convs[id]
	if c == nil {
		c = newConversation(e, id)
		e.convs[id] = c
	}
	c.refs++
	return c
}

// Close releases a conversation opened with Open; the last Close stops
// its turns and waits for them.
func (c *Conversation) Close() {
	e := c.e
	e.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last {
		delete(e.convs, c.ID)
	}
	e.mu.Unlock()
	if last {
		c.stop()
		c.wg.Wait()
	}
}

// Conversation is one conversation's engine: a goroutine that takes the
// faces' envelopes in order and owns the running turn, the pending edit
// and the turns' history.
type Conversation struct {
	ID  string
	e   *Engine
	cfg *Config
	log *slog.Logger

	refs int // under e.mu

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	queue *queue.Queue[func()]

	// Owned by the loop goroutine.
	handled map[string]bool // user message ids answered or being answered
	edit    *pendingEdit
	barrier <-chan struct{} // commands wait for it: a stopping turn
	last    *Turn
	held    *Turn // a preemptive turn not confirmed yet (Preempt)

	mu    sync.Mutex
	local []turnRecord // turns this process answered, newest last
	// stored: the turns storage held when last read (nil until then),
	// at storedVersion (Store.HistoryVersion); local is laid over it.
	stored        []turnRecord
	storedVersion uint64
	gone          map[string]bool // user messages this process superseded
	speaker       Speaker
	// attached counts Attach calls, so that a detach undoes its own only.
	attached int

	waitMu  sync.Mutex
	waiting map[string]chan *wire.ToolUseResult // client tool requests
}

func newConversation(e *Engine, id string) *Conversation {
	c := &Conversation{ID: id, e: e, cfg: &e.cfg, log: e.cfg.Logger.With("conversation", id), queue: queue.New[func()](),
		handled: map[string]bool{}, gone: map[string]bool{}, waiting: map[string]chan *wire.ToolUseResult{}}
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.loop()
	return c
}

// do queues f for the conversation's goroutine; it never blocks.
func (c *Conversation) do(f func()) { c.queue.Push(f, 0) }

func (c *Conversation) loop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.queue.Ready():
		}
		for {
			// One at a time, not Take: a stop queues its reply ahead of
			// what is still waiting (doFirst).
			f, ok := c.queue.Pop()
			if !ok {
				break
			}
			if c.barrier != nil {
				// A stop or variation waits for the turn it stopped; what
				// came after it waits too, so replies keep their order.
				select {
				case <-c.ctx.Done():
					return
				case <-c.barrier:
				}
				c.barrier = nil
			}
			f()
		}
	}
}

// Preference is what the user wants to see of the reasoning: the stored
// choice, or the operator's default for a user who never chose. A store
// that cannot answer gives off: never show reasoning to someone who may
// not want it.
func (e *Engine) Preference(ctx context.Context, identity string) reasoning.Mode {
	m, err := e.store.Mode(ctx, identity)
	switch {
	case err != nil:
		return reasoning.ModeOff
	case m == reasoning.ModeUnset:
		return e.cfg.ReasoningDefault
	case !m.Valid():
		return reasoning.ModeOff
	}
	return m
}

// effective is the reasoning a member receives: the user's preference,
// limited to what its client can display.
func (e *Engine) effective(ctx context.Context, m Member) reasoning.Mode {
	return e.Preference(ctx, m.Identity).Cap(reasoning.ModeFromFeatures(m.Features))
}

// Configure applies a client's features for identity (from its
// Configuration or its participant attributes). The stored preference
// changes only when the features say so explicitly
// (reasoning_preference:<mode>); the display features say what the client
// can show, never what the user wants. It returns the reasoning features
// in effect and the preference, for the face's Configuration reply.
func (c *Conversation) Configure(ctx context.Context, identity string, features wire.Features) []string {
	if m, ok := reasoning.PreferenceFromFeatures(features); ok {
		if err := c.e.store.SetMode(ctx, identity, m); err != nil {
			c.log.Error("saving preferences", "identity", identity, "err", err)
		}
	}
	pref := c.e.Preference(ctx, identity)
	out := pref.Cap(reasoning.ModeFromFeatures(features)).Features(features.PartialReasoning)
	return append(out, reasoning.PreferenceFeature(pref))
}

// Greeting is the features to state in a greeting to identity before its
// client said what it can display: none in effect yet, and the user's
// preference.
func (c *Conversation) Greeting(ctx context.Context, identity string) []string {
	return []string{reasoning.PreferenceFeature(c.e.Preference(ctx, identity))}
}

// Handle takes one client envelope from a face. It never blocks: the
// envelope is handled on the conversation's goroutine, in order.
func (c *Conversation) Handle(face Face, in Inbound) {
	if r, ok := in.Body.(*wire.ToolUseResult); ok {
		// A waiting tool call is part of the running turn: it is answered
		// at once, not after what the inbox holds.
		c.waitMu.Lock()
		ch := c.waiting[r.RequestID]
		delete(c.waiting, r.RequestID)
		c.waitMu.Unlock()
		if ch == nil {
			face.Send(wire.NewError(c.ID, wire.CodeToolNotFound, fmt.Sprintf("no tool request %q is waiting for a result", r.RequestID), wire.About(r.RequestID)), in.From)
			return
		}
		ch <- r
		return
	}
	c.do(func() { c.handle(face, in) })
}

// Ask starts a turn answering m as if it had been typed, with no
// Acknowledgement: speech calls it with a final transcript (whose id is
// the user message id), a face that keeps the conversation itself (AG-UI)
// with the options saying so. It returns the turn's handle, or nil if ctx
// or the conversation ended first.
func (c *Conversation) Ask(ctx context.Context, face Face, from string, m *wire.UserMessage, opts ...AskOption) *Turn {
	sp := spec{user: m, from: from, received: time.Now(), replaces: -1}
	for _, o := range opts {
		o(&sp)
	}
	return c.onLoop(ctx, func() *Turn {
		c.handled[sp.user.ID] = true
		if h := c.takeHeld(sp); h != nil {
			return h
		}
		return c.startTurn(face, sp)
	})
}

// onLoop runs f on the conversation's goroutine and returns its turn, or
// nil if ctx or the conversation ends first.
func (c *Conversation) onLoop(ctx context.Context, f func() *Turn) *Turn {
	t := make(chan *Turn, 1)
	c.do(func() { t <- f() })
	select {
	case r := <-t:
		return r
	case <-ctx.Done():
		return nil
	case <-c.ctx.Done():
		return nil
	}
}

func (c *Conversation) handle(face Face, in Inbound) {
	ack := func(id, notes string) {
		face.Send(&wire.Acknowledgement{ConversationID: c.ID, AcknowledgedStanzaID: in.StanzaID, AcknowledgedMessageID: id, Notes: notes}, in.From)
	}
	switch b := in.Body.(type) {
	case *wire.UserMessage:
		ack(b.ID, "")
		if c.handled[b.ID] {
			return // acknowledged again, not answered twice
		}
		edit := c.edit
		c.edit = nil
		if edit != nil && edit.from == in.From && time.Now().Before(edit.until) {
			c.handled[b.ID] = true
			b.PreviousID = edit.target
			c.startTurn(face, spec{user: b, from: in.From, received: in.Received, editOf: edit.target})
			return
		}
		if c.e.store.Saturated() {
			// Back-pressure: storage cannot keep up, so no new work until
			// it drains; the user may send the message again.
			face.Send(wire.NewError(c.ID, wire.CodeQueueFull, "The server is busy saving earlier conversations; send your message again in a moment.", wire.About(b.ID)), in.From)
			return
		}
		c.handled[b.ID] = true
		c.startTurn(face, spec{user: b, from: in.From, received: in.Received, replaces: -1})
	case *wire.ControlVariation:
		c.vary(face, in, b)
	case *wire.ControlStop:
		kind := b.StopType
		if kind == "" {
			kind = wire.StopGeneration
		}
		t := c.last
		if t == nil || !t.Interrupt(kind) {
			ack(b.TargetID, "nothing to stop")
			return
		}
		// Acknowledged once the turn's last packet is out.
		c.barrier = t.Done()
		c.doFirst(func() { ack(b.TargetID, "stopped") })
	case *wire.Commentary:
		ack(b.ID, "")
	default:
		face.Send(wire.NewError(c.ID, wire.CodeInvalidState, fmt.Sprintf("%s is not handled by this server yet", (&wire.Envelope{Body: in.Body}).Type())), in.From)
	}
}

// doFirst queues f ahead of everything queued: a reply that must follow
// a stopping turn but precede what came after it.
func (c *Conversation) doFirst(f func()) { c.queue.PushFront(f) }

// startTurn starts a turn that begins once the previous one is done: the
// previous one is stopped first, since a new question replaces its answer.
func (c *Conversation) startTurn(face Face, sp spec) *Turn {
	// A guess at what the speaker would ask gives way to what was asked.
	c.discardHeld()
	prev := c.last
	if prev != nil {
		select {
		case <-prev.Done():
		default:
			if prev.userMessageID == sp.user.ID && sp.vary == "" {
				// The same message asked again, whole (a speaker who added
				// to it): the answer being thought is not kept either.
				prev.supersede()
			}
			// Clients that saw the running answer begin (its steps, its
			// StartAnswer) learn that no more of it comes.
			prev.face.Send(&wire.Acknowledgement{ConversationID: c.ID, AcknowledgedMessageID: prev.answerID, Notes: NoteSuperseded})
		}
		prev.Interrupt(wire.StopAll)
	}
	t := newTurn(c.ctx, face, sp, prev)
	t.observe(c.ID, c.cfg.Telemetry)
	c.makeLatest(t)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer t.end()
		if prev != nil {
			<-prev.Done()
		}
		c.run(t)
	}()
	return t
}
