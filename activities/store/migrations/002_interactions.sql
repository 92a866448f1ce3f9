-- Interactions (approvals and questions) mirrored from workflow state, and session rules.
CREATE TABLE interactions (
    run_id        text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id            text NOT NULL,
    tenant_id     text NOT NULL,
    kind          text NOT NULL,
    step          integer NOT NULL,
    ord           integer NOT NULL,
    call_id       text NOT NULL,
    tool          text NOT NULL,
    arguments     jsonb NOT NULL,
    payload_hash  text NOT NULL,
    risk          text NOT NULL,
    subject       text NOT NULL,
    question      text,
    status        text NOT NULL,
    requester     text NOT NULL,
    approvers     jsonb NOT NULL,
    decision      text,
    decided_by    text,
    decided_at    timestamptz,
    answer        text,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, id)
);
CREATE INDEX interactions_pending ON interactions (tenant_id, status, expires_at);

-- Rules granted by `approve_always`; they last as long as the session.
CREATE TABLE session_rules (
    session_id  text NOT NULL,
    tenant_id   text NOT NULL,
    permission  text NOT NULL,
    pattern     text NOT NULL,
    action      text NOT NULL,
    granted_by  text NOT NULL,
    run_id      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, permission, pattern)
);

-- An acting tool call is claimed here before it runs, so a retry never runs it twice.
CREATE TABLE tool_executions (
    run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step        integer NOT NULL,
    ord         integer NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step, ord)
);
