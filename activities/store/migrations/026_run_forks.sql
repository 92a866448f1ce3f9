-- Rewind and fork: a run started from another run's conversation up to one of its steps
-- names that run and step. NULL for every run that was not forked.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS forked_from text;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS forked_at_step integer;
