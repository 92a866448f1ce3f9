-- A tool's output held for its `tool.after` hooks: the model, the events and the run's
-- messages see only what the hooks leave, so this row is deleted once they have run.
CREATE TABLE IF NOT EXISTS held_tool_outputs (
    run_id   text    NOT NULL,
    step     integer NOT NULL,
    ord      integer NOT NULL,
    content  text    NOT NULL,
    is_error boolean NOT NULL,
    PRIMARY KEY (run_id, step, ord)
);
