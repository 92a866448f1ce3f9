-- Tools a run discovered on its agent's MCP servers: what the model is offered and
-- where each call goes. The workflow history carries only the names.
CREATE TABLE mcp_tools (
    run_id text NOT NULL,
    name text NOT NULL,
    position integer NOT NULL,
    server text NOT NULL,
    url text NOT NULL,
    tool text NOT NULL,
    description text NOT NULL,
    input_schema jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, name)
);
