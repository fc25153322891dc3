-- +goose Up
-- The next server stanza magnitude of each conversation, reserved a block
-- at a time before use, so that a bot taking a room over after a crash
-- never reuses a number the first bot sent but had not logged yet.
CREATE TABLE alicia_stanza_blocks (
    conversation_id TEXT PRIMARY KEY,
    next            INTEGER NOT NULL CHECK (next > 0)
);
INSERT INTO alicia_stanza_blocks (conversation_id, next)
    SELECT conversation_id, -min(stanza_id) + 1 FROM alicia_envelopes GROUP BY conversation_id;

-- +goose Down
DROP TABLE alicia_stanza_blocks;
