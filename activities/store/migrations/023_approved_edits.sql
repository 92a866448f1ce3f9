-- Approve with edits: the arguments an approver changed a call to, and the hash of that
-- payload (what ran). NULL for a call approved as proposed, and for every earlier row.
ALTER TABLE interactions ADD COLUMN IF NOT EXISTS approved_arguments jsonb;
ALTER TABLE interactions ADD COLUMN IF NOT EXISTS approved_hash text;
