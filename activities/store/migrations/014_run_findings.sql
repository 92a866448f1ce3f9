-- A run's structured findings, taken from its report's `findings` block when it finished:
-- {"findings": [{file, line, severity, title, detail}], "error": null}; NULL when it had none.
ALTER TABLE runs ADD COLUMN findings jsonb;
