-- A2A push notification configs: where a client wants a task's updates POSTed. The token
-- is the client's own (sent back as X-A2A-Notification-Token), never a Keel secret. No
-- foreign key to runs: a config sent with the message that creates the task is stored
-- just before its run, so that the run's first update already finds it.
CREATE TABLE a2a_push_configs (
    task_id text NOT NULL,
    id text NOT NULL,
    tenant_id text NOT NULL,
    url text NOT NULL,
    token text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, id)
);
