-- Context budget: windows learnt from providers, compaction summaries, and Keel's own
-- estimate of each call (to calibrate against the provider's reported prompt tokens).
CREATE TABLE model_windows (
    model           text PRIMARY KEY,
    context_window  integer NOT NULL,
    learned_from    text NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE context_summaries (
    run_id         text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step           integer NOT NULL,
    level          integer NOT NULL,
    through_step   integer NOT NULL,
    content        text NOT NULL,
    tokens_before  integer NOT NULL,
    tokens_after   integer NOT NULL,
    prompt_tokens      integer NOT NULL DEFAULT 0,
    completion_tokens  integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step, level)
);

ALTER TABLE llm_calls ADD COLUMN estimated_tokens integer NOT NULL DEFAULT 0;
