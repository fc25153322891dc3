-- A step can be the last of reasoning stopped before the model finished
-- it: a reasoning budget ran out and the answer was asked for at once.
-- Existing steps were never cut.

-- +goose Up
ALTER TABLE alicia_reasoning_steps ADD COLUMN cut_short BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE alicia_reasoning_steps DROP COLUMN cut_short;
