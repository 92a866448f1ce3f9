-- The SHA-256 of the request that recorded a run: a retry with the same run id and the
-- same request is the same run; the same run id with another request is a conflict.
ALTER TABLE runs ADD COLUMN request_hash text;
