-- Sessions carry their workspace and model; LLM calls and runs carry their cost.
ALTER TABLE sessions ADD COLUMN workspace text NOT NULL DEFAULT '.';
ALTER TABLE sessions ADD COLUMN model text;
ALTER TABLE sessions ADD COLUMN approver text;
ALTER TABLE llm_calls ADD COLUMN cost_usd numeric(14, 6) NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cost_usd numeric(14, 6) NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN on_busy text;
CREATE INDEX runs_tenant_status ON runs (tenant_id, status);
