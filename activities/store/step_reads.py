"""What a model step reads before it calls the model, in one round trip.

The context budget's inputs (`BUDGET_INPUTS_SQL`), the session's earlier runs and the
run's conversation go out as one pipeline: three statements, one sync. The messages a
compaction summary stands for are left out by the statement itself, so the reads need
not wait for one another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from keel.activities.store.context_store import BUDGET_INPUTS_SQL, BudgetInputs, budget_inputs_of
from keel.activities.store.message_rows import RUN_MESSAGES_SQL, SESSION_HISTORY_SQL, with_session
from keel.activities.store.records import MessageRecord

RUN_MESSAGES_SINCE_SUMMARY_SQL = (
    "SELECT step, ord, role, content, tool_calls, tool_call_id, name,"
    " is_error, sha256 FROM messages WHERE run_id = %(run)s"
    " AND (step = 0 OR step > coalesce((SELECT through_step FROM context_summaries"
    " WHERE run_id = %(run)s ORDER BY step DESC, level DESC LIMIT 1), -1))"
    " ORDER BY step, ord"
)
"""`RUN_MESSAGES_AFTER_SQL` after the latest summary (`BUDGET_INPUTS_SQL`'s), or all."""


@dataclass(frozen=True)
class StepContext:
    """The budget's inputs (None with the budget off) and the conversation to send."""

    inputs: BudgetInputs | None
    history: list[MessageRecord]


class StepReads:
    """The reads of `llm_step`, pipelined."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def before_call(
        self, run_id: str, session_id: str | None, model: str, *, budget: bool
    ) -> StepContext:
        """As `ContextStore.budget_inputs` then `MessageRows.conversation(after_step=...)`
        of the summary's last step would read, in one round trip."""
        async with self._pool.connection() as conn, conn.pipeline():
            inputs_cur = (
                await conn.execute(BUDGET_INPUTS_SQL, {"run": run_id, "model": model})
                if budget
                else None
            )
            session_cur = (
                await conn.execute(SESSION_HISTORY_SQL, (session_id, run_id, run_id, run_id))
                if session_id
                else None
            )
            if budget:
                messages_cur = await conn.execute(RUN_MESSAGES_SINCE_SUMMARY_SQL, {"run": run_id})
            else:
                messages_cur = await conn.execute(RUN_MESSAGES_SQL, (run_id,))
            inputs_row = await inputs_cur.fetchone() if inputs_cur is not None else None
            earlier = await session_cur.fetchall() if session_cur is not None else []
            rows = [MessageRecord.model_validate(row) for row in await messages_cur.fetchall()]
        inputs = budget_inputs_of(inputs_row) if inputs_row is not None else None
        if inputs is not None and inputs.summary is not None:
            earlier = []  # what the summary covers is not read again, earlier runs neither
        return StepContext(inputs=inputs, history=with_session(earlier, rows))


def newly_shown(
    history: list[MessageRecord], messages: list[dict[str, Any]], step: int
) -> list[dict[str, Any]]:
    """The messages of a request that no earlier request of the run showed: the tool
    results of the step before and what came since (earlier ones were recorded with
    the call that first showed them). All of them when budgeting reshaped the request
    (a summary), so the two lists no longer line up."""
    if len(history) != len(messages):
        return messages
    return [m for record, m in zip(history, messages, strict=True) if record.step >= step - 1]
