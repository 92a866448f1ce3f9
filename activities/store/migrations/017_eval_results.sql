-- What `keel eval` found, recorded with the Keel its runs ran on, so the console lists
-- eval results beside the runs. The report is the eval's JSON, kept as text.
CREATE TABLE IF NOT EXISTS eval_results (
    tenant_id text NOT NULL,
    id text NOT NULL,
    requester text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    repeat integer NOT NULL,
    scenarios integer NOT NULL,
    passed integer NOT NULL,
    report_sha256 text NOT NULL,
    report text NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX IF NOT EXISTS eval_results_recent ON eval_results (tenant_id, recorded_at DESC);
