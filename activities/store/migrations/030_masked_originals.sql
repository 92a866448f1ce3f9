-- The originals of masked tool arguments and outputs, sealed (AES-256-GCM): the readable
-- copies (events, messages, audit) hold the masked values, the model and an admin with
-- keel:read-original read these. One row per call and kind, written once.
CREATE TABLE IF NOT EXISTS masked_originals (
    run_id     text        NOT NULL,
    step       integer     NOT NULL,
    ord        integer     NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('tool_output', 'tool_arguments')),
    tenant_id  text        NOT NULL,
    call_id    text        NOT NULL,
    tool       text        NOT NULL,
    key_id     text        NOT NULL,
    sealed     bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step, ord, kind)
);
CREATE INDEX IF NOT EXISTS masked_originals_by_call ON masked_originals (run_id, step, call_id);
