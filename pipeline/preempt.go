package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// Preemptive generation: while a speaker pauses, before the end of their
// turn is confirmed, speech may ask the engine to start thinking about
// what was said so far (Preempt). That turn is held: it runs against the
// model, but nothing of it leaves the engine (no envelope, nothing
// stored, no speech, no report) until the final transcript is asked
// (Ask) with the same message id and the same words; then what it held
// goes out at once, in order, and it goes on as any turn. Anything else
// (other words, the speaker going on, another turn, Withdraw) cancels it
// without a trace. The model's time to its first sentence is thus spent
// while the endpointing silence and the final recognition run, as LiveKit
// Agents does with its preemptive generation.

// The outcomes of a preemptive turn, as PreemptionObserver hears them.
const (
	PreemptTaken     = "taken"
	PreemptUsed      = "used"
	PreemptDiscarded = "discarded"
)

// PreemptionObserver counts preemptive turns by outcome: every one taken
// is later used or discarded. Config.Telemetry hears them when it
// implements it. Preempted must return at once.
type PreemptionObserver interface {
	Preempted(outcome string)
}

// errDiscarded cancels a held turn that was not confirmed.
var errDiscarded = errors.New("preemptive turn discarded")

// Preempt starts, held, the turn that asking m would start (opts as for
// Ask), and returns its handle, or nil if it did not: nothing reads the
// handle but its holder until Ask confirms it. It does not start one when a turn is running
// (its answer is not replaced on a guess), when the face renders the
// answer or the reasoning itself, or when storage is saturated. A held
// turn of the conversation not asked yet is discarded first.
func (c *Conversation) Preempt(ctx context.Context, face Face, from string, m *wire.UserMessage, opts ...AskOption) *Turn {
	sp := spec{user: m, from: from, replaces: -1}
	for _, o := range opts {
		o(&sp)
	}
	return c.onLoop(ctx, func() *Turn { return c.preempt(face, sp) })
}

// Withdraw discards the held turn on user message id, if there is one:
// its speaker went on talking, or said nothing after all. It never
// blocks.
func (c *Conversation) Withdraw(id string) {
	c.do(func() {
		if c.held != nil && c.held.userMessageID == id {
			c.log.Debug("preemptive turn withdrawn", "message", id)
			c.discardHeld()
		}
	})
}

func (c *Conversation) preempt(face Face, sp spec) *Turn {
	c.discardHeld()
	if prev := c.last; prev != nil {
		select {
		case <-prev.Done():
		default:
			return nil
		}
	}
	_, steps := face.(StepRenderer)
	_, deltas := face.(DeltaRenderer)
	if steps || deltas || c.e.store.Saturated() || c.handled[sp.user.ID] {
		return nil
	}
	sp.received = time.Now()
	h := &hold{}
	t := newTurn(c.ctx, heldFace{Face: face, h: h}, sp, c.last)
	t.hold = h
	t.observe(c.ID, c.cfg.Telemetry)
	// The report waits for the release, so that a held turn that ends
	// before it is confirmed is reported (as preemptive) only once used.
	t.unheld = t.Measure()
	c.held = t
	c.preempted(PreemptTaken)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer t.end()
		c.run(t)
	}()
	return t
}

// takeHeld returns the held turn if it answers sp exactly, released;
// otherwise it discards it and returns nil. On the loop.
func (c *Conversation) takeHeld(sp spec) *Turn {
	t := c.held
	if t == nil {
		return nil
	}
	if t.userMessageID != sp.user.ID || t.From != sp.from || sp.vary != "" || sp.editOf != "" || sp.messages != nil ||
		!SameTranscript(t.spec.user.Content, sp.user.Content) {
		c.log.Debug("preemptive turn discarded: another question was asked", "held", t.userMessageID, "asked", sp.user.ID, "guess", t.spec.user.Content, "final", sp.user.Content)
		c.discardHeld()
		return nil
	}
	c.held = nil
	if c.ctx.Err() != nil {
		// The conversation is closing: its turns were stopped.
		c.drop(t)
		return nil
	}
	c.makeLatest(t)
	t.hold.release()
	c.preempted(PreemptUsed)
	t.unheld(false)
	return t
}

// discardHeld cancels the held turn, if any, without a trace. On the
// loop.
func (c *Conversation) discardHeld() {
	if t := c.held; t != nil {
		c.held = nil
		c.drop(t)
	}
}

func (c *Conversation) drop(t *Turn) {
	t.hold.drop()
	t.mu.Lock()
	t.discarded = true
	t.mu.Unlock()
	t.cancel(errDiscarded)
	c.preempted(PreemptDiscarded)
}

func (c *Conversation) preempted(outcome string) {
	if o, ok := c.cfg.Telemetry.(PreemptionObserver); ok {
		o.Preempted(outcome)
	}
}

// SameTranscript reports whether two transcripts say the same words:
// case, punctuation and spacing aside, as recognisers vary them between
// an interim and a final pass over the same audio.
func SameTranscript(a, b string) bool {
	norm := func(s string) []string {
		return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' })
	}
	return slices.Equal(norm(a), norm(b))
}

// hold keeps what a held turn does outside the engine (its sends, its
// saves) until it is released, in order, or dropped. A nil hold holds
// nothing.
type hold struct {
	mu      sync.Mutex
	state   holdState
	pending []func()
}

type holdState uint8

const (
	holding holdState = iota
	releasing
	open
	dropped
)

// do runs f now if the hold is open, later if it holds, never if it was
// dropped.
func (h *hold) do(f func()) {
	if h == nil {
		f()
		return
	}
	h.mu.Lock()
	switch h.state {
	case holding, releasing:
		h.pending = append(h.pending, f)
		h.mu.Unlock()
		return
	case dropped:
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	f()
}

// release runs what was held, in order, and opens the hold. What the turn
// does meanwhile queues behind it, so that order holds; the sends and
// saves run outside the lock (they queue, but need not be quick).
func (h *hold) release() {
	for {
		h.mu.Lock()
		if h.state == dropped {
			h.mu.Unlock()
			return
		}
		batch := h.pending
		h.pending = nil
		if len(batch) == 0 {
			h.state = open
			h.mu.Unlock()
			return
		}
		h.state = releasing
		h.mu.Unlock()
		for _, f := range batch {
			f()
		}
	}
}

func (h *hold) drop() {
	h.mu.Lock()
	h.state, h.pending = dropped, nil
	h.mu.Unlock()
}

// heldFace is a held turn's face: its sends wait for the release.
type heldFace struct {
	Face
	h *hold
}

func (f heldFace) Send(body wire.Body, to ...string) {
	to = slices.Clone(to)
	f.h.do(func() { f.Face.Send(body, to...) })
}

// heldStore is a held turn's storage: reads go through, saves wait for
// the release.
type heldStore struct {
	Store
	h *hold
}

func (s heldStore) SaveConversation(c storage.Conversation) {
	s.h.do(func() { s.Store.SaveConversation(c) })
}
func (s heldStore) SaveMessage(m storage.Message) { s.h.do(func() { s.Store.SaveMessage(m) }) }
func (s heldStore) SaveStep(st reasoning.Step)    { s.h.do(func() { s.Store.SaveStep(st) }) }

// storeOf is the storage the turn writes through.
func (t *Turn) storeOf(s Store) Store {
	if t.hold == nil {
		return s
	}
	return heldStore{Store: s, h: t.hold}
}
