-- Each serving process renews a short lease here while it lives, naming
-- the rooms it serves and its bot's participant in each. A process that
-- finds another's lease expired deletes it (one DELETE wins) and has
-- those rooms dispatched again: a killed process's users get a new bot
-- in seconds, without waiting for LiveKit to notice the old one is gone.
--
-- An answer whose process died while streaming it is marked
-- 'interrupted' by the bot that takes the conversation over.

-- +goose Up
CREATE TABLE alicia_worker_leases (
    worker_id   TEXT PRIMARY KEY,
    agent_name  TEXT NOT NULL,
    rooms       TEXT[] NOT NULL DEFAULT '{}',
    bots        TEXT[] NOT NULL DEFAULT '{}',
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX alicia_worker_leases_expiry ON alicia_worker_leases (agent_name, expires_at);
ALTER TABLE alicia_messages DROP CONSTRAINT alicia_messages_status_check;
ALTER TABLE alicia_messages ADD CONSTRAINT alicia_messages_status_check
    CHECK (status IN ('streaming', 'complete', 'stopped', 'failed', 'superseded', 'interrupted'));

-- +goose Down
UPDATE alicia_messages SET status = 'stopped' WHERE status = 'interrupted';
ALTER TABLE alicia_messages DROP CONSTRAINT alicia_messages_status_check;
ALTER TABLE alicia_messages ADD CONSTRAINT alicia_messages_status_check
    CHECK (status IN ('streaming', 'complete', 'stopped', 'failed', 'superseded'));
DROP TABLE alicia_worker_leases;
