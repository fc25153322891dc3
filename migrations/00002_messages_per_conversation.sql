-- A user message keeps the id its client chose, and two clients may choose
-- the same one: a message is known by its conversation and its id. The
-- reasoning steps' uniqueness follows, since they name their message by
-- id. Existing rows keep their values; no row changes.

-- +goose Up
ALTER TABLE alicia_messages DROP CONSTRAINT alicia_messages_pkey;
ALTER TABLE alicia_messages ADD PRIMARY KEY (conversation_id, id);
ALTER TABLE alicia_reasoning_steps DROP CONSTRAINT alicia_reasoning_steps_message_id_step_index_key;
ALTER TABLE alicia_reasoning_steps ADD CONSTRAINT alicia_reasoning_steps_message_step
    UNIQUE (conversation_id, message_id, step_index);

-- +goose Down
-- Fails while two conversations hold the same message id: going back
-- would have to lose one of them.
ALTER TABLE alicia_reasoning_steps DROP CONSTRAINT alicia_reasoning_steps_message_step;
ALTER TABLE alicia_reasoning_steps ADD CONSTRAINT alicia_reasoning_steps_message_id_step_index_key
    UNIQUE (message_id, step_index);
ALTER TABLE alicia_messages DROP CONSTRAINT alicia_messages_pkey;
ALTER TABLE alicia_messages ADD PRIMARY KEY (id);
