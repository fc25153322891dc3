package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// vary handles a ControlVariation on the latest turn (rewriting an older
// one would leave the turns after it answering a question that changed):
// regenerate answers the same user message again and keeps the earlier
// answer as a variant; edit replaces the user message (inline newContent,
// or the UserMessage that follows within 5 s) and answers it; continue
// extends a stopped or cut answer.
func (c *Conversation) vary(s *room.Session, in room.Inbound, v *wire.ControlVariation) {
	c.stop()
	c.mu.Lock()
	last := len(c.turns) - 1
	var target turnRecord
	ok := last >= 0
	if ok {
		target = c.turns[last]
		ok = target.user.ID == v.TargetID
	}
	c.mu.Unlock()
	if !ok {
		s.SendError(wire.CodeInvalidState, true, fmt.Sprintf("%s works on the latest user message; %q is not it", v.Mode, v.TargetID), v.TargetID, in.From)
		return
	}
	s.Send(&wire.Acknowledgement{ConversationID: s.ID, AcknowledgedStanzaID: in.Envelope.StanzaID, AcknowledgedMessageID: v.TargetID, Notes: string(v.Mode)}, in.From)
	user := &wire.UserMessage{ID: target.user.ID, ConversationID: s.ID, Content: target.user.Content}
	switch v.Mode {
	case wire.VariationRegenerate:
		c.startTurn(spec{user: user, from: in.From, received: in.Received, variantOf: target.answerID, replaces: last})
	case wire.VariationContinue:
		c.startTurn(spec{user: user, from: in.From, received: in.Received, prefix: target.answer, replaces: last})
	case wire.VariationEdit:
		if v.NewContent != "" {
			c.editTurn(v.TargetID, &wire.UserMessage{ID: wire.NewID("msg"), ConversationID: s.ID, Content: v.NewContent}, in.From, in.Received)
			return
		}
		c.mu.Lock()
		c.edit = &pendingEdit{target: v.TargetID, from: in.From, until: time.Now().Add(editWait)}
		c.mu.Unlock()
		s.Go(func(ctx context.Context) {
			select {
			case <-ctx.Done():
			case <-time.After(editWait):
				c.mu.Lock()
				expired := c.edit != nil && c.edit.target == v.TargetID
				if expired {
					c.edit = nil
				}
				c.mu.Unlock()
				if expired {
					s.SendError(wire.CodeInvalidState, true, "the edit expired: no new message came within 5 seconds", v.TargetID, in.From)
				}
			}
		})
	default:
		s.SendError(wire.CodeMalformed, true, fmt.Sprintf("unknown variation mode %q (edit, regenerate, continue)", v.Mode), v.TargetID, in.From)
	}
}

// editTurn replaces the latest user message with m and answers it; the
// original is kept, marked superseded by m.
func (c *Conversation) editTurn(target string, m *wire.UserMessage, from string, received time.Time) {
	c.mu.Lock()
	last := len(c.turns) - 1
	ok := last >= 0 && c.turns[last].user.ID == target
	var old turnRecord
	if ok {
		old = c.turns[last]
	}
	c.mu.Unlock()
	if !ok {
		c.s.SendError(wire.CodeInvalidState, true, "edit works on the latest user message", target, from)
		return
	}
	c.s.Store().SaveMessage(storage.Message{ID: old.user.ID, ConversationID: c.s.ID, Role: "user", Content: old.user.Content,
		Status: storage.StatusSuperseded, ReplacedByID: m.ID})
	m.PreviousID = target
	c.startTurn(spec{user: m, from: from, received: received, replaces: last})
}
