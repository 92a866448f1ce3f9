-- A run's system prompt and input, kept out of its workflow history (claim check).
-- The key is the SHA-256 of both, so storing them again is a no-op.
CREATE TABLE run_texts (
    tenant_id text NOT NULL,
    key text NOT NULL,
    system_prompt text NOT NULL,
    input text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);

-- Whether a model has been fast lately decides where a run's first call runs.
CREATE INDEX llm_calls_model_recent ON llm_calls (model, created_at DESC);
