"""What the context budget keeps in Postgres: learnt windows, summaries, calibration."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from keel.activities.store.audit import redact
from keel.workflows.context.budget import Summary

# One round trip before each call: the learnt window, the latest calibration pair
# and the latest summary of the run.
BUDGET_INPUTS_SQL = (
    "SELECT (SELECT context_window FROM model_windows WHERE model = %(model)s) AS learned,"
    " c.prompt_tokens, c.estimated_tokens, s.step AS summary_step, s.level, s.through_step,"
    " s.content"
    " FROM (SELECT 1) AS one"
    " LEFT JOIN LATERAL (SELECT prompt_tokens, estimated_tokens FROM llm_calls"
    "  WHERE run_id = %(run)s AND estimated_tokens > 0 ORDER BY step DESC LIMIT 1) c ON true"
    " LEFT JOIN LATERAL (SELECT step, level, through_step, content FROM context_summaries"
    "  WHERE run_id = %(run)s ORDER BY step DESC, level DESC LIMIT 1) s ON true"
)
LEARN_WINDOW_SQL = (
    "INSERT INTO model_windows (model, context_window, learned_from) VALUES (%s, %s, %s)"
    " ON CONFLICT (model) DO UPDATE SET context_window = excluded.context_window,"
    " learned_from = excluded.learned_from, updated_at = now()"
)
# Usage of a compaction counts once, however often its activity is retried.
PUT_SUMMARY_SQL = (
    "WITH summary AS (INSERT INTO context_summaries (run_id, step, level, through_step,"
    " content, tokens_before, tokens_after, prompt_tokens, completion_tokens, cost_usd)"
    " VALUES (%(run)s, %(step)s, %(level)s, %(through)s, %(content)s, %(before)s, %(after)s,"
    " %(prompt)s, %(completion)s, %(cost)s) ON CONFLICT DO NOTHING RETURNING 1)"
    " UPDATE runs SET prompt_tokens = prompt_tokens + %(prompt)s,"
    " completion_tokens = completion_tokens + %(completion)s, cost_usd = cost_usd + %(cost)s"
    " WHERE id = %(run)s AND EXISTS (SELECT 1 FROM summary)"
)
GET_SUMMARY_SQL = (
    "SELECT through_step, content, tokens_before, tokens_after, prompt_tokens,"
    " completion_tokens, cost_usd::float AS cost_usd"
    " FROM context_summaries WHERE run_id = %s AND step = %s AND level = %s"
)
PUT_EVENT_SQL = (
    "INSERT INTO events (run_id, seq, type, data) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"
)


class BudgetInputs(BaseModel):
    """What the store knows that the budget of a call depends on."""

    learned_window: int | None = None
    calibration: float = 1.0
    summary: Summary | None = None
    summary_step: int | None = None
    """The step at which the latest summary was made."""
    summary_level: int = 0


class StoredSummary(BaseModel):
    """A compaction as stored."""

    through_step: int
    content: str
    tokens_before: int
    tokens_after: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float = 0.0
    """What the summarising call cost, by the worker's price table."""


def budget_inputs_of(row: dict[str, Any]) -> BudgetInputs:
    """`BudgetInputs` from a row of `BUDGET_INPUTS_SQL`."""
    calibration = 1.0
    if row["prompt_tokens"] and row["estimated_tokens"]:
        calibration = row["prompt_tokens"] / row["estimated_tokens"]
    summary = None
    if row["content"] is not None:
        summary = Summary(through_step=row["through_step"], content=row["content"])
    return BudgetInputs(
        learned_window=row["learned"],
        calibration=calibration,
        summary=summary,
        summary_step=row["summary_step"],
        summary_level=row["level"] or 0,
    )


class ContextStore:
    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def budget_inputs(self, run_id: str, model: str) -> BudgetInputs:
        async with self._pool.connection() as conn:
            cur = await conn.execute(BUDGET_INPUTS_SQL, {"run": run_id, "model": model})
            row = await cur.fetchone()
        assert row is not None
        return budget_inputs_of(row)

    async def learn_window(self, model: str, window: int, run_id: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(LEARN_WINDOW_SQL, (model, window, run_id))

    async def summary(self, run_id: str, step: int, level: int) -> StoredSummary | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(GET_SUMMARY_SQL, (run_id, step, level))
            row = await cur.fetchone()
        return StoredSummary.model_validate(row) if row else None

    async def put_summary(
        self,
        *,
        run_id: str,
        step: int,
        level: int,
        summary: StoredSummary,
        event_seq: int,
        event: dict[str, object],
    ) -> None:
        """Store a compaction and its `compaction` event in one transaction."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                PUT_SUMMARY_SQL,
                {
                    "run": run_id,
                    "step": step,
                    "level": level,
                    "through": summary.through_step,
                    "content": summary.content,
                    "before": summary.tokens_before,
                    "after": summary.tokens_after,
                    "prompt": summary.prompt_tokens,
                    "completion": summary.completion_tokens,
                    "cost": summary.cost_usd,
                },
            )
            await conn.execute(
                PUT_EVENT_SQL,
                (run_id, event_seq, "compaction", Jsonb(redact(event))),  # type: ignore[arg-type]
            )
