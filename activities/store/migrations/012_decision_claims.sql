-- Which decision request took, so a lost or repeated request can tell it was not the one.
ALTER TABLE interactions ADD COLUMN decision_id text;
-- A claim names the moment a process was started for the call (NULL: claimed, never started),
-- so a retry runs a call that never started and reports one whose outcome is unknown.
ALTER TABLE tool_executions ADD COLUMN process_started_at timestamptz;
ALTER TABLE tool_executions ADD COLUMN claimant text;
-- Claims from before this change: whether their call started is not known, so say it did.
UPDATE tool_executions SET process_started_at = started_at;
