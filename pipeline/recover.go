package pipeline

import (
	"errors"

	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// NoteInterrupted is the notes of the Acknowledgement that tells clients
// an answer will never finish: the process streaming it died, and the
// bot that took the conversation over found it unfinished. Its
// acknowledgedMessageId is the answer's id.
const NoteInterrupted = "interrupted"

// Recover finds the answers a dead process left streaming, stores them
// as interrupted, with what was stored of them, and tells face's
// clients. A bot that takes a conversation over calls it once, first:
// clients resuming from the dead bot's envelopes then learn that the
// answer they were reading has ended. What it read is the history the
// first turn needs.
func (c *Conversation) Recover(face Face) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		v, _ := c.e.store.HistoryVersion(c.ID)
		entries, err := c.e.store.History(c.ctx, c.ID)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			c.keepHistory(nil, v) // a new conversation
			return
		case err != nil:
			return // none to recover now; the first turn reads again
		}
		c.keepHistory(entries, v)
		var orphans []storage.Entry
		for _, e := range entries {
			if e.Role == "assistant" && e.Status == storage.StatusStreaming {
				orphans = append(orphans, e)
			}
		}
		if len(orphans) == 0 {
			return
		}
		c.do(func() {
			for _, e := range orphans {
				if c.handled[e.PreviousID] {
					continue // answered here since: the answer is this process's own
				}
				c.log.Warn("an answer was left unfinished by a process that died; marking it interrupted", "answer", e.ID)
				c.e.store.SaveMessage(storage.Message{ID: e.ID, ConversationID: c.ID, PreviousID: e.PreviousID, Role: "assistant",
					Content: e.Content, Status: storage.StatusInterrupted, VariantOf: e.VariantOf, CreatedAt: e.CreatedAt})
				face.Send(&wire.Acknowledgement{ConversationID: c.ID, AcknowledgedMessageID: e.ID, Notes: NoteInterrupted})
			}
		})
	}()
}
