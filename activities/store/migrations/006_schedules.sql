-- Runs started by a Temporal Schedule carry the schedule's id.
ALTER TABLE runs ADD COLUMN schedule_id text;
CREATE INDEX runs_schedule ON runs (schedule_id, created_at DESC) WHERE schedule_id IS NOT NULL;
