// Package reasoning turns the model's reasoning into steps, and steps into
// what each audience receives: ReasoningStep packets for LiveKit clients
// (each in the form its user chose), AG-UI reasoning events for AG-UI
// clients, and records for storage.
//
// A Chain follows one turn. It cuts the streamed reasoning into steps, one
// thought each: text up to a paragraph break, a tool call, the end of a
// backend's reasoning message, or the end of the reasoning. A step's text
// is trimmed of surrounding blank lines and otherwise kept byte for byte,
// so joining the steps with blank lines gives back the reasoning. Step
// indexes count 1, 2, 3… across the whole turn, tool rounds included, and
// every step names the turn's user message as its previous id.
package reasoning

import (
	"regexp"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/wire"
)

// Step is one thought of the model.
type Step struct {
	// ID is the step's NanoID: the ReasoningStep id, the AG-UI reasoning
	// message id and the stored row's id.
	ID             string
	ConversationID string
	// PreviousID is the user message (or final transcription) that
	// started the turn.
	PreviousID string
	// MessageID is the assistant message the reasoning belongs to.
	MessageID string
	Index     int32
	Content   string
	// EncryptedValue is an AG-UI backend's opaque value for the reasoning
	// message this step came from; it never goes to LiveKit clients.
	EncryptedValue string
	// SourceMessageID is the backend's id of that reasoning message, under
	// which the encrypted value goes back to it.
	SourceMessageID string
	// ToolCallID is set when the step is the last before a tool call.
	ToolCallID string
	// CutShort marks the last step of reasoning stopped before the model
	// finished it (Chain.Cut).
	CutShort  bool
	StartedAt time.Time
	EndedAt   time.Time
}

// Listener is told how steps evolve. A Chain calls it synchronously, in
// order, from the goroutine that feeds the Chain.
type Listener interface {
	// StepOpened: the step has its first non-blank text (s.Content).
	StepOpened(s *Step, now time.Time)
	// StepGrew: delta was appended to s.Content.
	StepGrew(s *Step, delta string, now time.Time)
	// StepClosed: s.Content is final.
	StepClosed(s *Step, now time.Time)
	// StepEncrypted: s.EncryptedValue was set.
	StepEncrypted(s *Step, now time.Time)
	// StepSealed: nothing more will change on s (its tool call id and
	// encrypted value are known); this is the moment to store it.
	StepSealed(s *Step)
	// PhaseEnded: a stretch of reasoning ended (answer text, a tool call
	// or the end of the model's output).
	PhaseEnded(now time.Time)
}

// Chain follows the reasoning of one turn. It is not safe for concurrent
// use: one goroutine feeds it.
type Chain struct {
	conversationID, previousID, messageID string
	listeners                             []Listener

	next    int32
	cur     *Step
	source  string
	lead    string // blank text before the current step's first word
	tail    string // whitespace held at the end: maybe a paragraph break
	content strings.Builder
	// unsealed is the last closed step, which a following tool call or
	// encrypted value may still complete.
	unsealed *Step
	inPhase  bool
	steps    []*Step
	// cutting: the step opened now is the marker of a cut (Cut).
	cutting bool
}

// NewChain starts the reasoning of a turn answering the user message
// previousID with the assistant message messageID.
func NewChain(conversationID, previousID, messageID string, listeners ...Listener) *Chain {
	return &Chain{conversationID: conversationID, previousID: previousID, messageID: messageID, listeners: listeners, next: 1}
}

// Steps returns the closed steps so far.
func (c *Chain) Steps() []*Step { return c.steps }

// paragraphBreak is a blank line: a newline, white space, a newline.
var paragraphBreak = regexp.MustCompile(`\n[ \t\r\f\v]*\n`)

// Reasoning appends a delta. sourceID is the backend's reasoning message
// id, if it has one (AG-UI); a new id starts a new step.
func (c *Chain) Reasoning(delta, sourceID string, now time.Time) {
	if delta == "" {
		return
	}
	if sourceID != c.source {
		c.closeStep(now)
		c.lead, c.tail = "", ""
		c.source = sourceID
	}
	c.inPhase = true
	buf := c.tail + delta
	c.tail = ""
	for {
		loc := paragraphBreak.FindStringIndex(buf)
		if loc == nil {
			break
		}
		c.appendText(buf[:loc[0]], now)
		c.closeStep(now)
		// What follows the break begins the next step; further blank lines
		// are its leading blank text.
		buf = buf[loc[1]-1:]
	}
	// Hold a trailing newline and the white space after it: with the next
	// delta it may make a paragraph break, and at the end it is a trailing
	// blank line to trim.
	if i := strings.LastIndexByte(buf, '\n'); i >= 0 && strings.IndexFunc(buf[i:], func(r rune) bool { return !isSpace(r) }) < 0 {
		c.tail = buf[i:]
		buf = buf[:i]
	}
	c.appendText(buf, now)
}

// appendText adds text to the current step, opening one at the first
// non-blank character and dropping the blank lines before it.
func (c *Chain) appendText(text string, now time.Time) {
	if text == "" {
		return
	}
	if c.cur == nil {
		text = c.lead + text
		first := strings.IndexFunc(text, func(r rune) bool { return !isSpace(r) })
		if first < 0 {
			c.lead = text
			return
		}
		// Keep the indentation of the first line, drop blank lines above.
		if nl := strings.LastIndexByte(text[:first], '\n'); nl >= 0 {
			text = text[nl+1:]
		}
		c.lead = ""
		c.open(text, now)
		return
	}
	c.content.WriteString(text)
	c.cur.Content = c.content.String()
	for _, l := range c.listeners {
		l.StepGrew(c.cur, text, now)
	}
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v'
}

func (c *Chain) open(text string, now time.Time) {
	c.seal()
	c.content.Reset()
	c.content.WriteString(text)
	c.cur = &Step{
		ID: wire.NewID("rs"), ConversationID: c.conversationID, PreviousID: c.previousID, MessageID: c.messageID,
		Index: c.next, Content: text, SourceMessageID: c.source, StartedAt: now, CutShort: c.cutting,
	}
	c.next++
	for _, l := range c.listeners {
		l.StepOpened(c.cur, now)
	}
}

func (c *Chain) closeStep(now time.Time) {
	c.lead = ""
	if c.cur == nil {
		return
	}
	s := c.cur
	c.cur = nil
	s.EndedAt = now
	c.steps = append(c.steps, s)
	c.unsealed = s
	for _, l := range c.listeners {
		l.StepClosed(s, now)
	}
}

func (c *Chain) seal() {
	if c.unsealed == nil {
		return
	}
	s := c.unsealed
	c.unsealed = nil
	for _, l := range c.listeners {
		l.StepSealed(s)
	}
}

// EndMessage closes the step of a backend reasoning message that ended
// (REASONING_MESSAGE_END).
func (c *Chain) EndMessage(sourceID string, now time.Time) {
	if sourceID == c.source {
		c.tail = ""
		c.closeStep(now)
	}
}

// Encrypted attaches a backend's encrypted value to the last step of the
// reasoning message sourceID.
func (c *Chain) Encrypted(sourceID, value string, now time.Time) {
	if sourceID == "" {
		return
	}
	target := c.cur
	if target == nil || target.SourceMessageID != sourceID {
		target = nil
		for i := len(c.steps) - 1; i >= 0 && target == nil; i-- {
			if c.steps[i].SourceMessageID == sourceID {
				target = c.steps[i]
			}
		}
	}
	if target == nil {
		return
	}
	target.EncryptedValue = value
	for _, l := range c.listeners {
		l.StepEncrypted(target, now)
	}
}

// ToolCall ends the reasoning phase before a tool call; the phase's last
// step, if no answer text came between, records the call's id.
func (c *Chain) ToolCall(callID string, now time.Time) {
	c.endPhase(callID, now)
}

func (c *Chain) endPhase(callID string, now time.Time) {
	c.tail = ""
	c.closeStep(now)
	if c.unsealed != nil && callID != "" && c.inPhase {
		c.unsealed.ToolCallID = callID
	}
	c.seal()
	if c.inPhase {
		c.inPhase = false
		c.source = ""
		for _, l := range c.listeners {
			l.PhaseEnded(now)
		}
	}
}

// End ends the reasoning phase: the answer began, or the model finished.
func (c *Chain) End(now time.Time) {
	c.endPhase("", now)
}

// CutMarker is the content of the step that marks a cut falling between
// two steps: every step so far is complete and already out, so the mark
// needs a step of its own.
const CutMarker = "…"

// Cut ends the reasoning phase because it was stopped before the model
// finished it (a reasoning budget ran out). The step being written is the
// last, kept as it stands and marked cut short; between steps, a marker
// step (CutMarker) is the last. Steps already out stay as they were.
func (c *Chain) Cut(now time.Time) {
	c.tail = ""
	if c.cur == nil {
		c.lead = ""
		c.cutting = true
		c.open(CutMarker, now)
		c.cutting = false
	}
	c.cur.CutShort = true
	c.inPhase = true
	c.endPhase("", now)
}
