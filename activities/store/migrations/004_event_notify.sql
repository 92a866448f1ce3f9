-- Every durable event announces itself on `keel_events` when its transaction
-- commits. API streams LISTEN there and then read the rows themselves, so the
-- notice stays small whatever the event holds, and a lost notice loses nothing.
-- activities/llm.py sends live `message_delta` notices on the same channel.
CREATE FUNCTION events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    payload text := json_build_object(
        'run_id', NEW.run_id, 'seq', NEW.seq, 'type', NEW.type
    )::text;
BEGIN
    -- NOTIFY refuses payloads of 8000 bytes or more; that must never fail the insert.
    IF octet_length(payload) < 8000 THEN
        PERFORM pg_notify('keel_events', payload);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER events_notify_insert
    AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION events_notify();
