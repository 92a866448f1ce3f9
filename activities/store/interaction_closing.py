"""What a run that ended leaves undecided ends with it.

A run waits on its interactions (an approval, a question, a client's tool result). If
it ends before anyone decides one (cancelled, failed, terminated), the interaction can
never be decided any more, so its row says so: `cancelled`, in the transaction that
records the run's end, with an audit entry each and, where the run's end is an event,
an `interaction_resolved` event each just before it. Every surface reads the row, so the
inbox, REST, A2A, MCP, the LangGraph API and AG-UI all show it ended, and a decision
sent for it is refused (409) with `closed_sentence`.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from keel.activities.store.audit import AuditEntry, AuditLog
from keel.activities.store.interaction_rows import COLUMNS, row_to_interaction
from keel.workflows.interactions.models import Interaction

__all__ = ["CLOSED_STATUS", "close_pending_in", "closed_sentence"]

CLOSED_STATUS = "cancelled"
"""An interaction's status once its run ended without a decision on it."""

CLOSE_PENDING_SQL = (
    "UPDATE interactions SET status = %s, updated_at = now()"
    f" WHERE run_id = %s AND status = 'pending' RETURNING tenant_id, {COLUMNS}"
)


async def close_pending_in(
    conn: AsyncConnection[Any], run_id: str, *, run_status: str, stop_reason: str
) -> list[Interaction]:
    """Inside the caller's transaction (the one recording the run's end): mark what the
    run still waited on `cancelled` and audit each; those closed, in the order they were
    opened (none on a retry)."""
    cur = await conn.execute(CLOSE_PENDING_SQL, (CLOSED_STATUS, run_id))
    rows = sorted(await cur.fetchall(), key=lambda r: (r["created_at"], r["step"], r["ord"]))
    for row in rows:
        await AuditLog.append_in(
            conn,
            AuditEntry(
                tenant_id=row["tenant_id"],
                actor="system",
                category="approval",
                action="interaction.cancelled",
                subject=f"{run_id}/{row['id']}",
                detail={
                    "kind": row["kind"],
                    "tool": row["tool"],
                    "run_status": run_status,
                    "stop_reason": stop_reason,
                },
            ),
        )
    return [row_to_interaction({k: v for k, v in row.items() if k != "tenant_id"}) for row in rows]


def closed_sentence(interaction_id: str, status: str, run_id: str, run_status: str) -> str:
    """Why a decision on a closed interaction cannot take, and what to do instead."""
    if status == CLOSED_STATUS:
        return (
            f"Interaction {interaction_id} was cancelled: run {run_id} ended ({run_status}) "
            "before anyone decided it, so nothing waits for a decision any more; start a "
            "new run to do the work."
        )
    return f"Interaction {interaction_id} is already {status}."
