-- A2A push notification configs: where a client wants a task's updates POSTed. The token
-- and the authentication (scheme and credentials, sent as `Authorization`) are the
-- client's own, never Keel secrets, and never enter a workflow history. No
-- foreign key to runs: a config sent with the message that creates the task is stored
-- just before its run, so that the run's first update already finds it. The task is the
-- run (`run_id`), so retention removes a run's configs with its other contents.
CREATE TABLE a2a_push_configs (
    run_id text NOT NULL,
    id text NOT NULL,
    tenant_id text NOT NULL,
    url text NOT NULL,
    token text,
    auth_scheme text,
    auth_credentials text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, id)
);
