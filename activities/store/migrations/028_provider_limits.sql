-- Provider rate limits shared by every worker: one row per endpoint and key (its hash,
-- never the key). A call reserves the next free moment atomically (the pace of the
-- requests and tokens per window) and a provider's retry-after or rate-limit headers
-- push `blocked_until` forward for every worker at once.
CREATE TABLE IF NOT EXISTS provider_limits (
    endpoint         text NOT NULL,
    key_hash         text NOT NULL,
    requests_next_at timestamptz NOT NULL DEFAULT now(),
    tokens_next_at   timestamptz NOT NULL DEFAULT now(),
    blocked_until    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint, key_hash)
);

-- Calls in flight, for a limit on concurrent calls. A lease is renewed while its call
-- runs and expires soon after a worker dies, so a killed worker never keeps a slot.
CREATE TABLE IF NOT EXISTS provider_leases (
    endpoint   text NOT NULL,
    key_hash   text NOT NULL,
    lease_id   text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (endpoint, key_hash, lease_id)
);

-- Which model answered a step and, when it was not the first one asked, why it moved.
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS fallback_from text;
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS fallback_reason text;
