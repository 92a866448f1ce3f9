-- Grants: what `approve_always` leaves behind, a permission rule that lasts for a run, a
-- session, or an agent and its user, with who granted it and until when; revocable.
-- One grant per decision (`interaction_id`), so a retried decision never stores two.
CREATE TABLE IF NOT EXISTS grants (
    id              text PRIMARY KEY,
    tenant_id       text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('run', 'session', 'agent')),
    permission      text NOT NULL,
    pattern         text NOT NULL,
    action          text NOT NULL DEFAULT 'allow',
    run_id          text NOT NULL,
    session_id      text,
    agent           text NOT NULL,
    user_ref        text NOT NULL,
    interaction_id  text NOT NULL,
    granted_by      text NOT NULL,
    created_at      timestamptz NOT NULL,
    until           timestamptz,
    revoked_at      timestamptz,
    revoked_by      text,
    UNIQUE (run_id, interaction_id)
);
CREATE INDEX IF NOT EXISTS grants_tenant_created ON grants (tenant_id, created_at DESC);
CREATE INDEX IF NOT EXISTS grants_session ON grants (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS grants_agent_user ON grants (tenant_id, agent, user_ref);
