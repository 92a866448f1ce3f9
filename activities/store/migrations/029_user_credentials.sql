-- Per-user credentials for tool backends, and secrets given by reference. Every token and
-- secret is sealed (AES-GCM under the payload keys, bound to its row); nothing here is
-- readable without a key.
CREATE TABLE IF NOT EXISTS user_credentials (
    tenant_id text NOT NULL,
    user_ref text NOT NULL,
    backend text NOT NULL,
    access_token bytea,
    access_expires_at timestamptz,
    refresh_token bytea,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_ref, backend)
);

CREATE TABLE IF NOT EXISTS secret_refs (
    id text PRIMARY KEY,
    tenant_id text NOT NULL,
    run_id text NOT NULL,
    interaction_id text NOT NULL,
    sealed bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS secret_refs_run ON secret_refs (run_id);
