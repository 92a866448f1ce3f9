-- Sub-agent runs point at their parent: the tree of a run is read by this index.
CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
