package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// turnRecord is one answered user message, as the model sees it again.
type turnRecord struct {
	user llm.Message
	// author is the identity of who wrote or said the user message
	// (empty for a message stored before authors were).
	author    string
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

// history is the conversation's turns as a new turn must see them: what
// storage holds, with this process's own turns laid over it (storage
// writes are queued and may not have landed yet). Storage is read again
// only when it says that something other than this engine wrote to the
// conversation since (a turn taken through another process or engine):
// the turns of the process serving a room cost no read.
func (c *Conversation) history(ctx context.Context) []turnRecord {
	v, known := c.e.store.HistoryVersion(c.ID)
	c.mu.Lock()
	fresh := known && c.stored != nil && c.storedVersion == v
	c.mu.Unlock()
	if !fresh {
		// The version is taken before the read: a write announced during
		// it makes the next turn read again.
		if read := c.readHistory(ctx); read != nil {
			c.mu.Lock()
			c.stored, c.storedVersion = read, v
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	turns := slices.DeleteFunc(slices.Clone(c.stored), func(t turnRecord) bool { return c.gone[t.user.ID] })
	for _, l := range c.local {
		turns = overlay(turns, l)
	}
	return turns
}

// readHistory is the turns storage holds; never nil, so that an empty
// conversation is kept as read too. A failed read gives nil, and the
// turn goes on with what was read before, if anything.
func (c *Conversation) readHistory(ctx context.Context) []turnRecord {
	entries, err := c.e.store.History(ctx, c.ID)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		c.log.Warn("reading the conversation's history; this turn goes without it", "err", err)
		return nil
	}
	return turnsOf(entries)
}

// keepHistory keeps entries read at version v as what storage holds,
// unless a turn read it first.
func (c *Conversation) keepHistory(entries []storage.Entry, v uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stored == nil {
		c.stored, c.storedVersion = turnsOf(entries), v
	}
}

// turnsOf is the answered turns of a conversation's stored messages.
func turnsOf(entries []storage.Entry) []turnRecord {
	turns := []turnRecord{}
	for _, e := range entries {
		switch {
		case e.Role == "user" && e.Status != storage.StatusSuperseded:
			turns = append(turns, turnRecord{user: llm.Message{ID: e.ID, Role: llm.RoleUser, Content: e.Content}, author: e.Author})
		case e.Role == "assistant" && len(turns) > 0 && turns[len(turns)-1].user.ID == e.PreviousID &&
			(e.Status == storage.StatusComplete || e.Status == storage.StatusStopped):
			// The latest answer counts: a regenerated one replaces the first.
			last := &turns[len(turns)-1]
			last.answerID, last.answer, last.encrypted = e.ID, e.Content, nil
			for _, st := range e.Steps {
				if st.EncryptedValue != "" && st.SourceMessageID != "" {
					last.encrypted = append(last.encrypted, llm.Message{ID: st.SourceMessageID, Role: llm.RoleReasoning, EncryptedValue: st.EncryptedValue})
				}
			}
		}
	}
	return turns
}

// overlay puts r in place of the turn on the same user message, or after
// the others.
func overlay(turns []turnRecord, r turnRecord) []turnRecord {
	if i := slices.IndexFunc(turns, func(t turnRecord) bool { return t.user.ID == r.user.ID }); i >= 0 {
		turns[i] = r
		return turns
	}
	return append(turns, r)
}

// remember lays a finished turn over what storage held. The oldest of
// the overlay's turns go into what was read once, so that none is lost
// from the history.
func (c *Conversation) remember(r turnRecord, sp *spec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sp.editOf != "" {
		c.gone[sp.editOf] = true
		c.local = slices.DeleteFunc(c.local, func(t turnRecord) bool { return t.user.ID == sp.editOf })
	}
	c.local = slices.DeleteFunc(c.local, func(t turnRecord) bool { return t.user.ID == r.user.ID })
	c.local = append(c.local, r)
	if n := len(c.local) - localTurns; n > 0 {
		if c.stored != nil {
			for _, old := range c.local[:n] {
				c.stored = overlay(c.stored, old)
			}
		}
		c.local = slices.Delete(c.local, 0, n)
	}
}

// localTurns bounds the overlay; older turns are folded into what was
// read (a late change to one, such as the words heard of an interrupted
// answer, comes within a turn or two).
const localTurns = 16

// historyOf is the turns as the model sees them. named: each user
// message begins with its author's identity (see attributed).
func historyOf(turns []turnRecord, named bool) []llm.Message {
	var out []llm.Message
	for _, t := range turns {
		out = append(out, attributed(t.user, t.author, named))
		out = append(out, t.encrypted...)
		if t.answer != "" {
			out = append(out, llm.Message{ID: t.answerID, Role: llm.RoleAssistant, Content: t.answer})
		}
	}
	return out
}

// severalSpeakersNote is added to the system prompt of a turn whose
// conversation has heard more than one person, so that the model reads
// the names that begin their messages as names, and does not repeat
// them.
const severalSpeakersNote = "\n\nSeveral people take part in this conversation. Each of their messages begins with the speaker's name and a colon; answer the person who spoke last, by name when it helps, and never begin your answer with a name and a colon."

// severalSpeakers reports whether more than one person has written or
// spoken in the conversation, counting from, who asks now.
func severalSpeakers(turns []turnRecord, from string) bool {
	seen := from
	for _, t := range turns {
		switch {
		case t.author == "" || t.author == seen:
		case seen == "":
			seen = t.author
		default:
			return true
		}
	}
	return false
}

// attributed is a user message as the model sees it in a conversation of
// several people: its content begins with its author's identity
// ("alice: …"). The content is the only place for it: Qwen3's chat
// template renders a message's role and content and nothing else (an
// OpenAI-style name on the message is accepted by vLLM and SGLang but
// never reaches the prompt), and Ollama's chat API has no such field.
func attributed(m llm.Message, author string, named bool) llm.Message {
	if named && author != "" {
		m.Content = author + ": " + m.Content
	}
	return m
}

// resolve checks a variation or edit against the history (they work on
// the latest turn only: rewriting an older one would leave the turns
// after it answering a question that changed) and fills in what the turn
// answers. false: refused, and the client was told.
func (c *Conversation) resolve(t *Turn, turns []turnRecord) bool {
	sp := &t.spec
	target := sp.editOf
	if sp.vary != "" {
		target = sp.user.ID
	}
	if target == "" {
		return true
	}
	last := len(turns) - 1
	if last < 0 || turns[last].user.ID != target {
		what := "edit"
		if sp.vary != "" {
			what = string(sp.vary)
		}
		t.face.Send(wire.NewError(c.ID, wire.CodeInvalidState, fmt.Sprintf("%s works on the latest user message; %q is not it", what, target), wire.About(target)), sp.from)
		return false
	}
	sp.replaces = last
	prev := turns[last]
	switch sp.vary {
	case wire.VariationRegenerate:
		sp.variantOf = prev.answerID
	case wire.VariationContinue:
		sp.prefix = prev.answer
	}
	if sp.vary != "" {
		t.face.Send(&wire.Acknowledgement{ConversationID: c.ID, AcknowledgedStanzaID: sp.stanza, AcknowledgedMessageID: target, Notes: string(sp.vary)}, sp.from)
		sp.user = &wire.UserMessage{ID: prev.user.ID, ConversationID: c.ID, Content: prev.user.Content}
		return true
	}
	c.e.store.SaveMessage(storage.Message{ID: prev.user.ID, ConversationID: c.ID, Role: "user", Content: prev.user.Content,
		Status: storage.StatusSuperseded, ReplacedByID: sp.user.ID})
	return true
}

// vary handles a ControlVariation: regenerate answers the latest user
// message again and keeps the earlier answer as a variant; edit replaces
// it (inline newContent, or the UserMessage that follows within editWait)
// and answers that; continue extends a stopped or cut answer.
func (c *Conversation) vary(face Face, in Inbound, v *wire.ControlVariation) {
	switch v.Mode {
	case wire.VariationRegenerate, wire.VariationContinue:
		c.startTurn(face, spec{user: &wire.UserMessage{ID: v.TargetID}, from: in.From, stanza: in.StanzaID, received: in.Received, vary: v.Mode})
	case wire.VariationEdit:
		face.Send(&wire.Acknowledgement{ConversationID: c.ID, AcknowledgedStanzaID: in.StanzaID, AcknowledgedMessageID: v.TargetID, Notes: string(v.Mode)}, in.From)
		if v.NewContent != "" {
			m := &wire.UserMessage{ID: wire.NewID("msg"), ConversationID: c.ID, PreviousID: v.TargetID, Content: v.NewContent}
			c.startTurn(face, spec{user: m, from: in.From, received: in.Received, editOf: v.TargetID})
			return
		}
		edit := &pendingEdit{target: v.TargetID, from: in.From, until: time.Now().Add(editWait)}
		c.edit = edit
		time.AfterFunc(editWait, func() {
			c.do(func() {
				if c.edit == edit {
					c.edit = nil
					face.Send(wire.NewError(c.ID, wire.CodeInvalidState, "the edit expired: no new message came within 5 seconds", wire.About(v.TargetID)), in.From)
				}
			})
		})
	default:
		face.Send(wire.NewError(c.ID, wire.CodeMalformed, fmt.Sprintf("unknown variation mode %q (edit, regenerate, continue)", v.Mode), wire.About(v.TargetID)), in.From)
	}
}
