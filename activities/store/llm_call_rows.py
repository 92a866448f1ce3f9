"""The `llm_calls` table: each model call's trace, and the usage it adds to its run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from keel.activities.store.coverage_store import RECORD_VIEW_SQL, FileView
from keel.activities.store.event_rows import events_json, put_event_in
from keel.activities.store.findings_store import FindingsLedger
from keel.activities.store.message_rows import put_message_in
from keel.activities.store.postgres_text import sha256_text, storable, storable_json
from keel.activities.store.quota_store import COUNT_TENANT_USAGE_SQL
from keel.activities.store.records import RecordedCall
from keel.activities.store.store_pool import PooledStore
from keel.workflows.run.findings import extract_all
from keel.workflows.run.step_models import ModelMove

# A model is taken to be fast when its latest calls, and at least a few, all were.
FAST_MODEL_SAMPLE = 10
FAST_MODEL_MIN_CALLS = 3
_CALL_AND_RUN_USAGE_SQL = (
    "call AS (INSERT INTO llm_calls (run_id, step, model, prompt_tokens,"
    " completion_tokens, latency_ms, attempt, finish_reason, cost_usd, estimated_tokens,"
    " fallback_from, fallback_reason)"
    " VALUES (%(run)s, %(step)s, %(model)s, %(prompt)s, %(completion)s,"
    " %(latency)s, %(attempt)s, %(finish)s, %(cost)s, %(estimated)s,"
    " %(fallback_from)s, %(fallback_reason)s)"
    " ON CONFLICT DO NOTHING RETURNING 1),"
    " run AS (UPDATE runs SET prompt_tokens = prompt_tokens + %(prompt)s,"
    " completion_tokens = completion_tokens + %(completion)s,"
    " steps = greatest(steps, %(step)s), cost_usd = cost_usd + %(cost)s"
    " WHERE id = %(run)s AND EXISTS (SELECT 1 FROM call) RETURNING tenant_id, requester)"
)
"""The trace's row and the run's usage, as CTEs both statements below share."""
RECORD_LLM_CALL_SQL = f"WITH {_CALL_AND_RUN_USAGE_SQL} {COUNT_TENANT_USAGE_SQL}"
"""A model call's trace; its usage counts on the run once per step, however often the
step's call is recorded (a retried activity records it again), and the run's `steps`
reach the call's step; a call a fallback model answered names the model it moved from and
why. The tenant's day counter (`tenant_usage_days`, what quotas hold against) grows by the
call in the same statement, as once. The router's classification is recorded by it too,
one step a round, so a router run's steps count its rounds while it routes."""
RECORD_ANSWER_SQL = (
    "WITH message AS (INSERT INTO messages (run_id, step, ord, role, content, tool_calls,"
    " is_error, sha256) VALUES (%(run)s, %(step)s, 1, 'assistant', %(content)s,"
    " %(tool_calls)s, false, %(sha)s) ON CONFLICT DO NOTHING),"
    " viewed AS (INSERT INTO file_views (run_id, path, first_line, last_line, total_lines)"
    " SELECT %(run)s, v->>'path', (v->>'first')::int, (v->>'last')::int, (v->>'total')::int"
    " FROM jsonb_array_elements(%(views)s) AS v ON CONFLICT DO NOTHING),"
    f" {_CALL_AND_RUN_USAGE_SQL},"
    f" counted AS ({COUNT_TENANT_USAGE_SQL}),"
    " written AS (INSERT INTO events (run_id, seq, type, data)"
    " SELECT %(run)s, (e->>'seq')::int, e->>'type', e->'data'"
    " FROM jsonb_array_elements(%(events)s) AS e ON CONFLICT DO NOTHING)"
    " SELECT 1"
)
"""`record_assistant` as one statement (one round trip, atomic without a transaction):
the message, the file views, the trace, the run's usage and the tenant's day counter
(once per step, as `RECORD_LLM_CALL_SQL`) and the two events. Used unless the message
holds findings."""
LATEST_CALL_LATENCIES_SQL = (
    "SELECT count(*) AS calls, max(latency_ms) AS slowest FROM ("
    " SELECT latency_ms FROM llm_calls WHERE model = %s"
    " ORDER BY created_at DESC LIMIT %s) latest"
)
RECORDED_CALL_SQL = (
    "SELECT m.tool_calls, c.prompt_tokens, c.completion_tokens, c.latency_ms"
    " FROM messages m"
    " JOIN llm_calls c ON c.run_id = m.run_id AND c.step = m.step"
    " WHERE m.run_id = %s AND m.step = %s AND m.ord = 1 AND m.role = 'assistant'"
)
USAGE_BY_TENANT_SQL = (
    "SELECT r.tenant_id, count(DISTINCT r.id) AS runs,"
    " count(c.run_id) AS llm_calls,"
    " coalesce(sum(c.prompt_tokens), 0)::bigint AS prompt_tokens,"
    " coalesce(sum(c.completion_tokens), 0)::bigint AS completion_tokens,"
    " coalesce(sum(c.cost_usd), 0)::float AS cost_usd"
    " FROM runs r LEFT JOIN llm_calls c ON c.run_id = r.id"
    " GROUP BY r.tenant_id ORDER BY r.tenant_id"
)


def _call_of(call: dict[str, object]) -> dict[str, object]:
    """A stored tool call as the `message` event shows it: its function and its id."""
    function = call.get("function")
    return {**(function if isinstance(function, dict) else {}), "id": call.get("id")}


class LlmCallRows(PooledStore):
    """Model calls: recorded with their message and events, read back on retry."""

    async def model_is_fast(self, model: str, below_ms: int) -> bool:
        """Whether the model's latest calls (at least a few) all took under `below_ms`."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(LATEST_CALL_LATENCIES_SQL, (model, FAST_MODEL_SAMPLE))
            row = await cur.fetchone()
        if row is None or row["calls"] < FAST_MODEL_MIN_CALLS:
            return False
        return bool(row["slowest"] < below_ms)

    async def recorded_call(self, run_id: str, step: int) -> RecordedCall | None:
        """The model call already recorded for this step, if an earlier attempt made it."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(RECORDED_CALL_SQL, (run_id, step))
            row = await cur.fetchone()
        if row is None:
            return None
        return RecordedCall(
            tool_calls=row["tool_calls"] or [],
            prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"],
            latency_ms=row["latency_ms"],
        )

    async def record_assistant(
        self,
        *,
        run_id: str,
        step: int,
        content: str,
        tool_calls: list[dict[str, object]],
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: int,
        attempt: int,
        finish_reason: str,
        event_seq: int,
        cost_usd: float = 0.0,
        estimated_tokens: int = 0,
        views: Sequence[FileView] = (),
        moved: ModelMove | None = None,
    ) -> None:
        """Store an LLM call's message, trace, usage and events in one transaction, with
        the lines of each file the request showed (the coverage ledger) and the findings
        blocks the message holds (the findings ledger).

        Findings are taken from every assistant message as it is stored, so one written
        before a compaction, or left out of the final answer, is kept all the same; they
        are keyed as the final answer's are (`FindingsLedger.settle_in`: source `answer`,
        the step, the valid block's place), so a retried call, or the final answer
        settled again, records nothing twice.

        One statement (`RECORD_ANSWER_SQL`), so one round trip; a message with findings
        blocks is recorded by a pipeline of statements in a transaction instead.
        """
        events: list[tuple[int, str, dict[str, object]]] = [
            (
                event_seq,
                "message",
                {
                    "step": step,
                    "content": content,
                    # With each call's id, so protocol adapters can tie results to calls.
                    "tool_calls": [_call_of(c) for c in tool_calls],
                },
            ),
            (
                event_seq + 1,
                "usage",
                {
                    "step": step,
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "latency_ms": latency_ms,
                },
            ),
        ]
        call = {
            "run": run_id,
            "step": step,
            "model": model,
            "prompt": prompt_tokens,
            "completion": completion_tokens,
            "latency": latency_ms,
            "attempt": attempt,
            "finish": finish_reason,
            "cost": cost_usd,
            "estimated": estimated_tokens,
            "fallback_from": moved.from_model if moved else None,
            "fallback_reason": f"{moved.reason}: {moved.detail}" if moved else None,
        }
        taken = [block for block in extract_all(content) if block.error is None]
        if not taken:
            stored = storable(content)
            async with self._pool.connection() as conn:
                await conn.execute(
                    RECORD_ANSWER_SQL,
                    {
                        **call,
                        "content": stored,
                        "sha": sha256_text(stored),
                        "tool_calls": Jsonb(storable_json(tool_calls)) if tool_calls else None,
                        "views": Jsonb(
                            [
                                {"path": v.path, "first": v.first, "last": v.last, "total": v.total}
                                for v in views
                            ]
                        ),
                        "events": events_json(events),
                    },
                )
            return
        async with self._pool.connection() as conn, conn.pipeline(), conn.transaction():
            for view in views:
                await conn.execute(
                    RECORD_VIEW_SQL, (view.run_id, view.path, view.first, view.last, view.total)
                )
            await put_message_in(
                conn, run_id, step, 1, "assistant", content, tool_calls=tool_calls or None
            )
            for idx, block in enumerate(taken):
                await FindingsLedger.record_in(
                    conn, run_id, "answer", step, idx + 1, block.findings
                )
            # Usage counts once per step, however often the step's call is recorded.
            await conn.execute(RECORD_LLM_CALL_SQL, call)
            for seq, type_, data in events:
                await put_event_in(conn, run_id, seq, type_, data)

    async def usage_by_tenant(self) -> list[dict[str, Any]]:
        """Runs, LLM calls, tokens and cost per tenant."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(USAGE_BY_TENANT_SQL)
            return list(await cur.fetchall())
