-- Tenant quotas (issue 29): an admin's ceilings on what a tenant (or one user of it) may
-- spend in tokens and US dollars per UTC day and per UTC month, and the counters they are
-- held against. A missing ceiling (NULL) is no ceiling; user_id '' is the whole tenant.
CREATE TABLE IF NOT EXISTS tenant_quotas (
    tenant_id text NOT NULL,
    user_id text NOT NULL DEFAULT '',
    tokens_per_day bigint CHECK (tokens_per_day >= 0),
    cost_usd_per_day numeric(16, 6) CHECK (cost_usd_per_day >= 0),
    tokens_per_month bigint CHECK (tokens_per_month >= 0),
    cost_usd_per_month numeric(16, 6) CHECK (cost_usd_per_month >= 0),
    updated_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);

-- What each user of each tenant spent per UTC day: added to by the statement that records
-- a model call (once per step, as the run's usage is), and never purged by retention, so
-- a quota holds however long the runs' contents are kept.
CREATE TABLE IF NOT EXISTS tenant_usage_days (
    tenant_id text NOT NULL,
    day date NOT NULL,
    user_id text NOT NULL,
    tokens bigint NOT NULL DEFAULT 0,
    cost_usd numeric(16, 6) NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day, user_id)
);

-- This month's calls made before the counters existed count too.
INSERT INTO tenant_usage_days (tenant_id, day, user_id, tokens, cost_usd)
SELECT r.tenant_id, (c.created_at AT TIME ZONE 'UTC')::date, r.requester,
       sum(c.prompt_tokens + c.completion_tokens), sum(c.cost_usd)
FROM llm_calls c JOIN runs r ON r.id = c.run_id
WHERE c.created_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
GROUP BY 1, 2, 3
ON CONFLICT DO NOTHING;
