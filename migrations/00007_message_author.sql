-- A user message names who wrote or said it: the participant identity
-- of its sender, so that a conversation with several people keeps who
-- said what. Assistant messages, and user messages stored before, have
-- none.

-- +goose Up
ALTER TABLE alicia_messages ADD COLUMN author TEXT;

-- +goose Down
ALTER TABLE alicia_messages DROP COLUMN author;
