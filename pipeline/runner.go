// Package pipeline is Alicia's conversation engine: a user message goes
// to the model; its reasoning becomes steps for those who want them; its
// answer goes out as a StartAnswer and sentences, or as one
// AssistantMessage to clients that did not negotiate streaming.
//
// The engine does not know its transports. A face (room.Session for
// LiveKit, the AG-UI endpoint over SSE, an in-memory fake in tests)
// implements Outbox and Roster and hands client envelopes to
// Conversation.Handle. Each conversation has one goroutine that takes
// them in order and owns the running turn.
//
// # The turn handle, for speech
//
// A turn is a *Turn. A voice stage living beside the faces uses it so:
//
//   - Conversation.Attach(speaker) hands speaker.Speak every turn
//     started, typed or spoken; Conversation.Ask(ctx, face, from, m,
//     Spoken()) starts one from a final transcript (m.ID is the
//     transcript id, which is the user message id; no Acknowledgement or
//     UserMessage echo is sent), thinking as chosen for spoken turns (by
//     default within a reasoning budget, so that the answer starts soon).
//   - Turn.Sentences(ctx) yields the answer's sentences in order as each
//     completes, and ends with the answer; reasoning never enters it.
//     Sentence.Retracted() is closed when the answer takes a sentence
//     back (reasoning streamed as answer before a bare </think>): drop
//     its audio not played yet, and leave its words out of what was
//     Heard.
//   - Turn.Speak() marks speech as playing the turn (call the returned
//     func when playout ends); Turn.SpeechInterrupted() is closed by
//     Interrupt(wire.StopSpeech) or Interrupt(wire.StopAll): clear the
//     audio queue then, and tell the turn what was Heard.
//   - Turn.Interrupt(wire.StopGeneration) stops the model,
//     Interrupt(wire.StopAll) both; Turn.Done() is closed when the
//     answer is sent and saved.
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

var errStopped = errors.New("stopped by the user")

// NoteSuperseded is the notes of the Acknowledgement that tells clients
// an answer they may have seen begin (its steps, its StartAnswer) was
// stopped by a newer message, or by the same message asked again whole;
// its acknowledgedMessageId is the superseded answer's id.
const NoteSuperseded = "superseded"

// spec says what a turn answers.
type spec struct {
	user     *wire.UserMessage
	from     string
	stanza   int32
	received time.Time
	// vary: a ControlVariation on user message target (regenerate or
	// continue); editOf: the user message that user replaces.
	vary   wire.VariationMode
	editOf string
	// replaces: the index of the turn rewritten, or -1 for a new one.
	replaces  int
	variantOf string // regenerate: the earlier answer
	prefix    string // continue: the answer so far

	// A face that keeps the conversation itself (AG-UI) gives the
	// messages, extra system text and its tools, and ends the turn when
	// the model calls one of them.
	messages    []llm.Message
	system      string
	clientTools []wire.ClientTool
	toolsEnd    bool

	// spoken: the turn answers speech (Spoken); thinking and budget are
	// the asking face's own choice (WithThinking, WithReasoningBudget).
	spoken   bool
	thinking ThinkingMode
	budget   *Budget
}

// AskOption is what a face that keeps the conversation itself adds to a
// turn it asks for.
type AskOption func(*spec)

// WithMessages gives the whole conversation the model sees, instead of
// the stored history and the question.
func WithMessages(m []llm.Message) AskOption { return func(s *spec) { s.messages = m } }

// WithSystem appends text to the system prompt.
func WithSystem(extra string) AskOption { return func(s *spec) { s.system = extra } }

// WithClientTools offers the model tools the asking client runs itself;
// with endTurn, a call to one ends the turn (the client answers in its
// next request) instead of waiting for a ToolUseResult.
func WithClientTools(tools []wire.ClientTool, endTurn bool) AskOption {
	return func(s *spec) { s.clientTools, s.toolsEnd = tools, endTurn }
}

// run is one turn: model rounds until the model answers without calling
// a tool, or the bound of rounds is reached.
func (c *Conversation) run(t *Turn) {
	ctx, sp, face := t.ctx, &t.spec, t.face
	// A preemptive turn saves nothing until it is confirmed.
	store := t.storeOf(c.e.store)
	q, ok := c.question(t)
	if !ok {
		return
	}
	m := sp.user
	now := time.Now()
	if sp.vary == "" {
		store.SaveMessage(storage.Message{ID: m.ID, ConversationID: c.ID, PreviousID: m.PreviousID, Role: "user", Author: q.author, Content: m.Content, Status: storage.StatusComplete, CreatedAt: sp.received})
	}
	store.SaveMessage(storage.Message{ID: t.answerID, ConversationID: c.ID, PreviousID: m.ID, Role: "assistant", Status: storage.StatusStreaming, VariantOf: sp.variantOf, CreatedAt: now})

	r := c.reasoningOf(t, store)
	clientTools := clientToolsOf(sp, face)
	system := c.cfg.System + sp.system
	if q.named {
		system += severalSpeakersNote
	}
	thinking, budget := c.thinkingFor(sp, face)
	req := &llm.Request{ConversationID: c.ID, System: system, Thinking: thinking, Tools: c.toolDefs(clientTools), Messages: q.messages}

	a := newAnswer(c.ID, t, face)
	endedForTools := false
	failure := c.cfg.rounds(ctx, req, r.chain, r.deliver, turnHooks{
		text:    a.write,
		retract: a.retract,
		tools: func(calls []llm.ToolCall) ([]llm.Message, bool) {
			if sp.toolsEnd && slices.ContainsFunc(calls, func(call llm.ToolCall) bool { _, ok := clientTools[call.Name]; return ok }) {
				// The client runs its own tools after the turn, and its
				// next request carries the results.
				for _, call := range calls {
					face.Send(clientCallRequest(c.ID, t.answerID, call), sp.from)
				}
				endedForTools = true
				return nil, true
			}
			return c.runTools(ctx, face, calls, clientTools, sp.from, t.answerID), false
		},
	}, budget)
	r.chain.End(time.Now())
	t.generationEnded()
	stopped := errors.Is(context.Cause(ctx), errStopped)
	a.finish(stopped)
	status := c.outcome(t, failure, stopped, a.text.Len() == 0 && !endedForTools)
	c.keep(t, store, q.author, status, a.text.String(), now, r.encrypted)
}

// asked is what the model is asked in a turn, and by whom.
type asked struct {
	messages []llm.Message
	// author wrote or said the question; named: the model is told who
	// said what, since more than one person has.
	author string
	named  bool
}

// question is the conversation the model sees for t: the face's own, or
// the stored history up to the question; false if the turn cannot be
// answered (resolve said why).
func (c *Conversation) question(t *Turn) (asked, bool) {
	sp := &t.spec
	q := asked{author: sp.from}
	if sp.messages != nil {
		q.messages = sp.messages
		return q, true
	}
	turns := c.history(t.ctx)
	if !c.resolve(t, turns) {
		return q, false
	}
	upTo := len(turns)
	switch i := slices.IndexFunc(turns, func(r turnRecord) bool { return r.user.ID == sp.user.ID }); {
	case sp.replaces >= 0:
		upTo = sp.replaces
	case i >= 0 && sp.vary == "" && sp.editOf == "":
		// The message asked again, whole: it replaces its first form.
		upTo = i
	}
	if sp.vary != "" {
		q.author = turns[sp.replaces].author // answered again for whoever asks
	}
	q.named = severalSpeakers(turns, q.author)
	q.messages = append(historyOf(turns[:upTo], q.named), attributed(llm.Message{ID: sp.user.ID, Role: llm.RoleUser, Content: sp.user.Content}, q.author, q.named))
	if sp.prefix != "" {
		// Continue: the model sees its cut answer and is asked to go on.
		q.messages = append(q.messages, llm.Message{Role: llm.RoleAssistant, Content: sp.prefix},
			llm.Message{Role: llm.RoleUser, Content: "Continue your previous answer exactly where it stopped, without repeating it."})
	}
	return q, true
}

// turnReasoning is where a turn's reasoning goes: its chain of steps,
// and the deliverer that sends them to the face's members, unless the
// face renders steps itself.
type turnReasoning struct {
	chain   *reasoning.Chain
	deliver *reasoning.Deliverer
	// encrypted is an AG-UI backend's encrypted reasoning, which goes
	// back to it on the next turn under its own message id; other
	// backends never see it.
	encrypted []llm.Message
}

func (c *Conversation) reasoningOf(t *Turn, store Store) *turnReasoning {
	r := &turnReasoning{}
	m, face := t.spec.user, t.face
	sealed := reasoning.OnSealed(func(st reasoning.Step) {
		store.SaveStep(st)
		if st.EncryptedValue != "" && st.SourceMessageID != "" {
			r.encrypted = append(r.encrypted, llm.Message{ID: st.SourceMessageID, Role: llm.RoleReasoning, EncryptedValue: st.EncryptedValue})
		}
	})
	if sr, ok := face.(StepRenderer); ok {
		r.chain = reasoning.NewChain(c.ID, m.ID, t.answerID, sr.Steps(), sealed)
		return r
	}
	r.deliver = c.deliverer(face)
	r.chain = reasoning.NewChain(c.ID, m.ID, t.answerID, r.deliver, sealed)
	return r
}

// clientToolsOf are the tools the asking client offers, announced or
// given with the turn.
func clientToolsOf(sp *spec, face Roster) map[string]wire.ClientTool {
	tools := map[string]wire.ClientTool{}
	for _, mb := range face.Members() {
		if mb.Identity == sp.from {
			for _, ct := range mb.Tools {
				tools[ct.Name] = ct
			}
		}
	}
	for _, ct := range sp.clientTools {
		tools[ct.Name] = ct
	}
	return tools
}

// outcome is the stored status of t's answer once the model is done, and
// tells the face of a failure; empty: the model said nothing, and no
// client tool ended the turn.
func (c *Conversation) outcome(t *Turn, failure error, stopped, empty bool) string {
	ctx, m := t.ctx, t.spec.user
	switch {
	case stopped && t.isSuperseded():
		// The answer comes from the turn on the same message that
		// replaced it.
		return storage.StatusSuperseded
	case stopped:
		return storage.StatusStopped
	case errors.Is(context.Cause(ctx), errDiscarded):
		// A preemptive turn not confirmed: nothing of it is kept or said.
	case failure != nil:
		c.log.Warn("turn failed", "err", failure)
		t.face.Send(wire.NewError(c.ID, wire.CodeServiceUnavailable, "The model failed while answering: "+plainReason(failure)+". What was said so far is kept.", wire.About(m.ID)))
		return storage.StatusFailed
	case ctx.Err() != nil:
		return storage.StatusStopped // the conversation closed
	case empty:
		t.face.Send(wire.NewError(c.ID, wire.CodeServiceUnavailable, "The model returned no answer.", wire.About(m.ID)))
	}
	return storage.StatusComplete
}

// keep stores t's answer as generated, or as far as it was heard when
// speech cut it, and remembers the turn for the next one's history.
func (c *Conversation) keep(t *Turn, store Store, author, status, content string, at time.Time, encrypted []llm.Message) {
	sp, m := &t.spec, t.spec.user
	late := func(h Heard) {
		text := h.Text
		c.do(func() {
			store.SaveMessage(storage.Message{ID: t.answerID, ConversationID: c.ID, PreviousID: m.ID, Role: "assistant", Content: text, Status: storage.StatusStopped, VariantOf: sp.variantOf, CreatedAt: at})
			c.mu.Lock()
			for i := range c.local {
				if c.local[i].answerID == t.answerID {
					c.local[i].answer = sp.prefix + text
				}
			}
			c.mu.Unlock()
		})
	}
	if heard := t.takeHeard(late); heard != nil {
		content = heard.Text
		if status != storage.StatusSuperseded {
			status = storage.StatusStopped
		}
	}
	store.SaveMessage(storage.Message{ID: t.answerID, ConversationID: c.ID, PreviousID: m.ID, Role: "assistant", Content: content, Status: status, VariantOf: sp.variantOf, CreatedAt: at})
	if status != storage.StatusSuperseded {
		t.hold.do(func() {
			c.remember(turnRecord{user: llm.Message{ID: m.ID, Role: llm.RoleUser, Content: m.Content}, author: author, encrypted: encrypted, answerID: t.answerID, answer: sp.prefix + content}, sp)
		})
	}
}

// viewers is the face's members as the reasoning sees them: each one's
// preference as far as its client can display it, and whether its client
// takes partial steps or reads steps as streams.
func (c *Conversation) viewers(face Roster) []reasoning.Viewer {
	var out []reasoning.Viewer
	for _, m := range face.Members() {
		if m.ReasoningStreams {
			// A stream reader shows every level: the preference decides.
			out = append(out, reasoning.Viewer{Identity: m.Identity, Mode: c.e.Preference(context.Background(), m.Identity), Streams: true})
			continue
		}
		mode := c.e.effective(context.Background(), m)
		out = append(out, reasoning.Viewer{Identity: m.Identity, Mode: mode, Partial: m.Features.PartialReasoning})
	}
	slices.SortFunc(out, func(x, y reasoning.Viewer) int { return strings.Compare(x.Identity, y.Identity) })
	return out
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

// clientCallRequest announces a call the client runs after the turn.
func clientCallRequest(conv, answerID string, call llm.ToolCall) *wire.ToolUseRequest {
	var args map[string]any
	_ = json.Unmarshal([]byte(call.Arguments), &args) // the client judges its own arguments
	return &wire.ToolUseRequest{ID: call.ID, ConversationID: conv, MessageID: answerID, ToolName: call.Name, Parameters: args, Execution: wire.ExecutionClient}
}
