-- An interaction its run left undecided ends with the run (activities/store/
-- interaction_closing.py does so, audited, from now on). Rows recorded before still say
-- `pending` under a run that ended: they end too, so no reader has to second-guess them.
UPDATE interactions i SET status = 'cancelled', updated_at = now()
FROM runs r
WHERE r.id = i.run_id AND i.status = 'pending'
  AND r.status IN ('completed', 'failed', 'cancelled');
