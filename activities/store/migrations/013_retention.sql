-- Per-tenant retention: how many days a finished run's contents are kept.
CREATE TABLE tenant_retention (
    tenant_id       text PRIMARY KEY,
    days            integer NOT NULL CHECK (days BETWEEN 1 AND 36500),
    updated_by      text NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- The last sweep: when, how many runs it emptied in all, the head of the digest
    -- chain over what it removed, and the audit hash of its record (kept out of the
    -- audit log too, so cutting rows from the chain's end can be noticed).
    last_swept_at   timestamptz,
    runs_purged     bigint NOT NULL DEFAULT 0,
    removed_head    text,
    last_audit_hash text
);

-- When a run's contents were removed; the row (status, usage, cost) stays.
ALTER TABLE runs ADD COLUMN purged_at timestamptz;
-- Finds a tenant's oldest finished runs not yet purged.
CREATE INDEX runs_retention ON runs (tenant_id, finished_at)
    WHERE purged_at IS NULL AND status IN ('completed', 'failed', 'cancelled');
