-- The audit log: append-only and hash-chained, one chain per tenant (rows with
-- no tenant form the system chain). Each row's hash covers its content and the
-- previous row's hash, so editing, deleting or moving a row breaks the chain;
-- activities/audit.py writes and verifies it.
CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    tenant_id   text,
    actor       text,
    category    text NOT NULL,
    action      text NOT NULL,
    severity    text NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    subject     text,
    detail      jsonb NOT NULL,
    prev_hash   text NOT NULL,
    hash        text NOT NULL UNIQUE
);
-- Walks one chain in order, and finds a chain's last row on append.
CREATE INDEX audit_log_chain ON audit_log (tenant_id, id);

-- The database refuses edits too; someone who disables this trigger is still
-- caught by verification.
CREATE FUNCTION audit_log_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Audit rows can only be inserted.';
END;
$$;

CREATE TRIGGER audit_log_no_update_delete
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change();

CREATE TRIGGER audit_log_no_truncate
    BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_change();
