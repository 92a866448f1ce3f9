-- Sessions, runs, their messages and events, and LLM call traces.
CREATE TABLE sessions (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL,
    agent       text NOT NULL,
    created_by  text NOT NULL,
    metadata    jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_tenant_created ON sessions (tenant_id, created_at DESC);

CREATE TABLE runs (
    id                 text PRIMARY KEY,
    tenant_id          text NOT NULL,
    session_id         text REFERENCES sessions (id),
    agent              text NOT NULL,
    model              text NOT NULL,
    requester          text NOT NULL,
    trigger            text NOT NULL,
    parent_run_id      text,
    workspace          text NOT NULL,
    input              text NOT NULL,
    status             text NOT NULL,
    stop_reason        text,
    error              text,
    report             text,
    steps              integer NOT NULL DEFAULT 0,
    tool_calls         integer NOT NULL DEFAULT 0,
    prompt_tokens      bigint NOT NULL DEFAULT 0,
    completion_tokens  bigint NOT NULL DEFAULT 0,
    metadata           jsonb NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    finished_at        timestamptz
);
CREATE INDEX runs_tenant_created ON runs (tenant_id, created_at DESC);
CREATE INDEX runs_session ON runs (session_id, created_at);

-- One row per message; (step, ord) orders the conversation of a run.
CREATE TABLE messages (
    run_id        text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step          integer NOT NULL,
    ord           integer NOT NULL,
    role          text NOT NULL,
    content       text,
    tool_calls    jsonb,
    tool_call_id  text,
    name          text,
    is_error      boolean NOT NULL DEFAULT false,
    sha256        text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step, ord)
);

CREATE TABLE events (
    run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq         integer NOT NULL,
    type        text NOT NULL,
    data        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE llm_calls (
    run_id             text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step               integer NOT NULL,
    model              text NOT NULL,
    prompt_tokens      integer NOT NULL,
    completion_tokens  integer NOT NULL,
    latency_ms         integer NOT NULL,
    attempt            integer NOT NULL,
    finish_reason      text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step)
);
