package storage

import (
	"time"

	"github.com/jackc/pgx/v5"
)

// The batch's statements, one per table, each inserting all of the
// batch's rows for its table from arrays: their text never changes, so
// every connection prepares each once. Every statement is idempotent: a
// batch retried after a lost commit acknowledgement writes nothing twice.
const (
	insertConversations = `INSERT INTO alicia_conversations (id, owner_identity, created_at, updated_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[])
		ON CONFLICT (id) DO UPDATE SET updated_at = greatest(alicia_conversations.updated_at, excluded.updated_at)`
	insertMessages = `INSERT INTO alicia_messages (id, conversation_id, previous_id, role, content, status, variant_of, replaced_by_id, created_at, updated_at, author)
		SELECT id, conversation_id, nullif(previous_id, ''), role, content, status, nullif(variant_of, ''), nullif(replaced_by_id, ''), created_at, updated_at, nullif(author, '')
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[], $11::text[])
			AS m (id, conversation_id, previous_id, role, content, status, variant_of, replaced_by_id, created_at, updated_at, author)
		ON CONFLICT (conversation_id, id) DO UPDATE SET content = excluded.content, status = excluded.status,
			replaced_by_id = coalesce(excluded.replaced_by_id, alicia_messages.replaced_by_id), updated_at = excluded.updated_at,
			author = coalesce(excluded.author, alicia_messages.author)`
	insertSteps = `INSERT INTO alicia_reasoning_steps (id, conversation_id, message_id, previous_id, step_index, content, content_encrypted,
			encrypted_value, tool_call_id, cut_short, started_at, created_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int4[], $6::text[], $7::bytea[],
			$8::text[], $9::text[], $10::bool[], $11::timestamptz[], $12::timestamptz[])
		ON CONFLICT (id) DO NOTHING`
	// An envelope's destinations are a slice of one flat array ($7): an
	// array of arrays must be rectangular, and lists of addressees are
	// not. A negative count stands for NULL (everyone).
	insertEnvelopes = `INSERT INTO alicia_envelopes (conversation_id, stanza_id, payload, encrypted, destinations, sent_at)
		SELECT conversation_id, stanza_id, payload, encrypted,
			CASE WHEN n >= 0 THEN ($7::text[])[first + 1 : first + n] END, sent_at
		FROM unnest($1::text[], $2::int4[], $3::bytea[], $4::bool[], $5::int4[], $6::int4[], $8::timestamptz[])
			AS e (conversation_id, stanza_id, payload, encrypted, first, n, sent_at)
		ON CONFLICT DO NOTHING`
)

// statements groups a batch by table. Conversations go first, so that
// the rows referring to them find them. One statement may not touch a
// row twice, so the records of one row are merged into the row the
// statements one record at a time would have left (each table's add says
// how).
func statements(batch []record, origin string) *pgx.Batch {
	var (
		conv conversationColumns
		msg  messageColumns
		step stepColumns
		env  envelopeColumns
	)
	for i := range batch {
		r := &batch[i]
		switch {
		case r.conv != nil:
			conv.add(r.conv)
		case r.msg != nil:
			msg.add(r.msg, r.enqueued)
		case r.step != nil:
			step.add(r.step)
		case r.env != nil:
			env.add(r.env)
		}
	}
	b := &pgx.Batch{}
	conv.queue(b)
	msg.queue(b)
	step.queue(b)
	env.queue(b)
	if changed := historyChanged(msg.conv, step.conv); len(changed) > 0 {
		// Delivered at commit, with the rows.
		b.Queue(announceHistory, origin, changed)
	}
	return b
}

// conversationColumns are a batch's conversation rows, one array per
// column of insertConversations.
type conversationColumns struct {
	row              map[string]int // by id
	id, owner        []string
	created, updated []time.Time
}

// add keeps a conversation's first owner and creation time, and its
// latest time as updated_at.
func (c *conversationColumns) add(conv *Conversation) {
	if j, ok := c.row[conv.ID]; ok {
		if conv.CreatedAt.After(c.updated[j]) {
			c.updated[j] = conv.CreatedAt
		}
		return
	}
	if c.row == nil {
		c.row = map[string]int{}
	}
	c.row[conv.ID] = len(c.id)
	c.id, c.owner = append(c.id, conv.ID), append(c.owner, conv.Owner)
	c.created, c.updated = append(c.created, conv.CreatedAt), append(c.updated, conv.CreatedAt)
}

func (c *conversationColumns) queue(b *pgx.Batch) {
	if len(c.id) > 0 {
		b.Queue(insertConversations, c.id, c.owner, c.created, c.updated)
	}
}

// messageColumns are a batch's message rows, one array per column of
// insertMessages.
type messageColumns struct {
	row                                                              map[messageKey]int
	id, conv, prev, role, content, status, variant, replaced, author []string
	created, updated                                                 []time.Time
}

type messageKey struct{ conv, id string }

// add keeps a message's first version's place (previous message, role,
// variant, creation time), its last version's content, status and update
// time (when it was queued), and the last replacement and author named.
func (c *messageColumns) add(m *Message, queued time.Time) {
	if j, ok := c.row[messageKey{m.ConversationID, m.ID}]; ok {
		c.content[j], c.status[j], c.updated[j] = m.Content, m.Status, queued
		if m.ReplacedByID != "" {
			c.replaced[j] = m.ReplacedByID
		}
		if m.Author != "" {
			c.author[j] = m.Author
		}
		return
	}
	if c.row == nil {
		c.row = map[messageKey]int{}
	}
	c.row[messageKey{m.ConversationID, m.ID}] = len(c.id)
	c.id, c.conv, c.prev = append(c.id, m.ID), append(c.conv, m.ConversationID), append(c.prev, m.PreviousID)
	c.role, c.content, c.status = append(c.role, m.Role), append(c.content, m.Content), append(c.status, m.Status)
	c.variant, c.replaced = append(c.variant, m.VariantOf), append(c.replaced, m.ReplacedByID)
	c.created, c.updated = append(c.created, m.CreatedAt), append(c.updated, queued)
	c.author = append(c.author, m.Author)
}

func (c *messageColumns) queue(b *pgx.Batch) {
	if len(c.id) > 0 {
		b.Queue(insertMessages, c.id, c.conv, c.prev, c.role, c.content, c.status, c.variant, c.replaced, c.created, c.updated, c.author)
	}
}

// stepColumns are a batch's reasoning step rows, one array per column of
// insertSteps.
type stepColumns struct {
	seen                        map[string]bool // by id
	id, conv, msg, prev         []string
	index                       []int32
	content, encValue, toolCall []*string
	sealed                      [][]byte
	cut                         []bool
	started, ended              []time.Time
}

// add keeps a step's first version: the statement would not have
// written the later ones.
func (c *stepColumns) add(s *stepRow) {
	if c.seen[s.id] {
		return
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[s.id] = true
	c.id, c.conv, c.msg, c.prev = append(c.id, s.id), append(c.conv, s.conversationID), append(c.msg, s.messageID), append(c.prev, s.previousID)
	c.index, c.content, c.sealed = append(c.index, s.index), append(c.content, s.content), append(c.sealed, s.sealed)
	c.encValue, c.toolCall, c.cut = append(c.encValue, s.encryptedValue), append(c.toolCall, s.toolCallID), append(c.cut, s.cutShort)
	c.started, c.ended = append(c.started, s.startedAt), append(c.ended, s.endedAt)
}

func (c *stepColumns) queue(b *pgx.Batch) {
	if len(c.id) > 0 {
		b.Queue(insertSteps, c.id, c.conv, c.msg, c.prev, c.index, c.content, c.sealed,
			c.encValue, c.toolCall, c.cut, c.started, c.ended)
	}
}

// envelopeColumns are a batch's envelope rows, one array per column of
// insertEnvelopes, and the flat array of their destinations.
type envelopeColumns struct {
	seen      map[envelopeKey]bool
	conv      []string
	stanza    []int32
	payload   [][]byte
	encrypted []bool
	first, n  []int32
	sent      []time.Time
	dests     []string
}

type envelopeKey struct {
	conv   string
	stanza int32
}

// add keeps an envelope's first version: the statement would not have
// written the later ones.
func (c *envelopeColumns) add(e *envRow) {
	k := envelopeKey{e.ConversationID, e.StanzaID}
	if c.seen[k] {
		return
	}
	if c.seen == nil {
		c.seen = map[envelopeKey]bool{}
	}
	c.seen[k] = true
	n := int32(-1)
	if e.To != nil {
		n = int32(len(e.To))
	}
	c.conv, c.stanza, c.payload = append(c.conv, e.ConversationID), append(c.stanza, e.StanzaID), append(c.payload, e.Payload)
	c.encrypted, c.sent = append(c.encrypted, e.encrypted), append(c.sent, e.SentAt)
	c.first, c.n = append(c.first, int32(len(c.dests))), append(c.n, n)
	c.dests = append(c.dests, e.To...)
}

func (c *envelopeColumns) queue(b *pgx.Batch) {
	if len(c.conv) == 0 {
		return
	}
	dests := c.dests
	if dests == nil {
		dests = []string{} // never NULL: an empty list is '{}', not NULL
	}
	b.Queue(insertEnvelopes, c.conv, c.stanza, c.payload, c.encrypted, c.first, c.n, dests, c.sent)
}

// announceHistory tells every store listening which conversations' messages
// or steps a batch wrote ("origin conversation"; Postgres sends each
// distinct payload of a transaction once).
const announceHistory = `SELECT pg_notify('` + historyChannel + `', $1 || ' ' || c) FROM unnest($2::text[]) AS c`

// historyChanged lists each conversation of convs once.
func historyChanged(convs ...[]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, list := range convs {
		for _, c := range list {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}
