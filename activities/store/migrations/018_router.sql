-- The capability router (`agent: "auto"`): which agents each tenant enables for it
-- (no row: every catalogue agent), and every decision a router run took, per round.
CREATE TABLE IF NOT EXISTS router_tenant_agents (
    tenant_id text PRIMARY KEY,
    agents text[] NOT NULL,
    updated_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS route_decisions (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    round integer NOT NULL,
    tenant_id text NOT NULL,
    requester text NOT NULL,
    outcome text NOT NULL,
    agent text,
    reason text NOT NULL,
    question text,
    candidates jsonb NOT NULL,
    excluded jsonb NOT NULL,
    classification jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, round)
);
CREATE INDEX IF NOT EXISTS route_decisions_tenant ON route_decisions (tenant_id, created_at DESC);
