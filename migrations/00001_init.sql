-- Alicia's schema. Compared with the reference implementation's tables:
-- reasoning steps carry their conversation and their user message, keep
-- the wire id as their primary key, count from 1 under a uniqueness
-- constraint, are written once per step (not per token), use timestamps
-- with time zone set by the writer, and go away with their conversation
-- (no soft delete that leaves steps behind).

-- +goose Up
CREATE TABLE alicia_conversations (
    id             TEXT PRIMARY KEY,          -- the LiveKit room name
    owner_identity TEXT NOT NULL,             -- the token identity of the user who started it
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX alicia_conversations_owner ON alicia_conversations (owner_identity, updated_at DESC);

CREATE TABLE alicia_messages (
    id              TEXT PRIMARY KEY,          -- the wire id (a user message keeps its client-chosen id)
    conversation_id TEXT NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    previous_id     TEXT,                      -- assistant: its user message; user: the answer it follows
    role            TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content         TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL DEFAULT 'complete'
                    CHECK (status IN ('streaming', 'complete', 'stopped', 'failed', 'superseded')),
    variant_of      TEXT,                      -- an earlier answer to the same user message (regenerate)
    replaced_by_id  TEXT,                      -- an edited user message's replacement
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX alicia_messages_conversation ON alicia_messages (conversation_id, created_at, id);

CREATE TABLE alicia_reasoning_steps (
    id                TEXT PRIMARY KEY,        -- the ReasoningStep id: one id everywhere
    conversation_id   TEXT NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    message_id        TEXT NOT NULL,           -- the assistant message the reasoning belongs to
    previous_id       TEXT NOT NULL,           -- the user message that prompted it
    step_index        INTEGER NOT NULL CHECK (step_index >= 1),
    total_steps       INTEGER CHECK (total_steps >= step_index),
    content           TEXT,                    -- plain mode
    content_encrypted BYTEA,                   -- encrypted mode: AES-GCM nonce || ciphertext
    encrypted_value   TEXT,                    -- an AG-UI backend's opaque value, returned to it
    tool_call_id      TEXT,                    -- set when the step came right before a tool call
    started_at        TIMESTAMPTZ NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,    -- when the step was complete
    CHECK ((content IS NULL) <> (content_encrypted IS NULL)),
    UNIQUE (message_id, step_index)
);
CREATE INDEX alicia_reasoning_steps_conversation ON alicia_reasoning_steps (conversation_id, created_at, step_index);
CREATE INDEX alicia_reasoning_steps_user_message ON alicia_reasoning_steps (previous_id, step_index);

CREATE TABLE alicia_user_preferences (
    identity       TEXT PRIMARY KEY,
    reasoning_mode TEXT NOT NULL DEFAULT 'off' CHECK (reasoning_mode IN ('off', 'summary', 'full')),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Every envelope the server sent, for resume after a restart: the exact
-- bytes under their original stanza id, and whom they were addressed to.
CREATE TABLE alicia_envelopes (
    conversation_id TEXT NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    stanza_id       INTEGER NOT NULL CHECK (stanza_id < 0),
    payload         BYTEA NOT NULL,
    encrypted       BOOLEAN NOT NULL DEFAULT false, -- reasoning payloads in encrypted mode
    destinations    TEXT[],                         -- NULL: everyone in the room
    sent_at         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (conversation_id, stanza_id)
);

-- +goose Down
DROP TABLE alicia_envelopes;
DROP TABLE alicia_user_preferences;
DROP TABLE alicia_reasoning_steps;
DROP TABLE alicia_messages;
DROP TABLE alicia_conversations;
