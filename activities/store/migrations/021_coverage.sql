-- The coverage ledger: the lines of each file a run's model was shown (`read_file`
-- outputs as sent, after the context budget cut them), and a run's coverage record.
CREATE TABLE IF NOT EXISTS file_views (
    run_id       text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    path         text NOT NULL,
    first_line   integer NOT NULL,
    last_line    integer NOT NULL,
    total_lines  integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, path, first_line, last_line)
);

ALTER TABLE runs ADD COLUMN IF NOT EXISTS coverage jsonb;
