-- The findings ledger: each finding a run made, recorded when it was made, from a
-- `findings` block of its answer (source 'answer') or a `report_finding` call (source
-- 'tool'). Keyed by where it was made, so a retried activity writes nothing twice.
-- A report's findings (and `runs.findings`) are rendered from the rows of its run tree.
CREATE TABLE IF NOT EXISTS run_findings (
    run_id      text    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    source      text    NOT NULL CHECK (source IN ('answer', 'tool')),
    step        integer NOT NULL,
    ord         integer NOT NULL,
    idx         integer NOT NULL,
    file        text    NOT NULL,
    line        integer,
    severity    text    NOT NULL CHECK (severity IN ('high', 'medium', 'low')),
    title       text    NOT NULL,
    detail      text    NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, source, step, ord, idx)
);
