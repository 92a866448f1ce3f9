-- A compaction's summarising call costs money like any other model call: its cost is
-- kept with the summary and added to the run's, once, however often the activity retries.
ALTER TABLE context_summaries ADD COLUMN IF NOT EXISTS cost_usd numeric(14, 6) NOT NULL DEFAULT 0;
