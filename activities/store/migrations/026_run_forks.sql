-- Rewind and fork: a run started from another run's conversation up to one of its steps
-- names that run and step. NULL for every run that was not forked.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS forked_from text;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS forked_at_step integer;
-- Where a run's workspace is a git work tree (and KEEL_WORKSPACE_TREES is on): a commit
-- of its files before the run's first write (step 0) and after each step that wrote.
CREATE TABLE IF NOT EXISTS workspace_trees (
    run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step        integer NOT NULL,
    commit_sha  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step)
);
-- The commit of the original's workspace after the step a fork was made at, if recorded.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS forked_tree text;
