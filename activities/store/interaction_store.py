"""Interactions and session rules in Postgres: the mirror of what runs wait on."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from keel.activities.store.event_rows import put_event_in
from keel.activities.store.interaction_rows import COLUMNS, event_data, row_to_interaction
from keel.workflows.gate.permissions import PermissionRule
from keel.workflows.interactions.models import Interaction

# A run that ends closes what it waited on (interaction_closing), so `pending` is live.
PENDING_FOR_TENANT_SQL = (
    f"SELECT run_id, {COLUMNS} FROM interactions"
    " WHERE tenant_id = %s AND status = 'pending'"
    " ORDER BY created_at, run_id, id LIMIT %s"
)

# Requests still waiting for a person, by tenant: the API's metrics gauge.
PENDING_BY_TENANT_SQL = (
    "SELECT tenant_id, count(*) AS pending FROM interactions"
    " WHERE status = 'pending' GROUP BY tenant_id"
)


class InteractionStore:
    """Idempotent writes keyed by (run_id, interaction id)."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConnection[dict[str, Any]]]:
        return self._pool

    async def open(
        self,
        *,
        run_id: str,
        tenant_id: str,
        interactions: list[Interaction],
        event_seq: int,
    ) -> None:
        """Record new pending interactions and their `interaction_pending` events."""
        async with self._pool.connection() as conn, conn.transaction():
            for offset, ia in enumerate(interactions):
                await conn.execute(
                    "INSERT INTO interactions (run_id, id, tenant_id, kind, step, ord, call_id,"
                    " tool, arguments, payload_hash, risk, subject, question, status, requester,"
                    " approvers, created_at, expires_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s,"
                    " %s, %s, %s) ON CONFLICT DO NOTHING",
                    (
                        run_id,
                        ia.id,
                        tenant_id,
                        ia.kind,
                        ia.step,
                        ia.ord,
                        ia.call_id,
                        ia.tool,
                        ia.arguments,
                        ia.payload_hash,
                        ia.risk,
                        ia.subject,
                        ia.question,
                        ia.status,
                        ia.requester,
                        Jsonb(ia.approvers),
                        ia.created_at,
                        ia.expires_at,
                    ),
                )
                await put_event_in(
                    conn, run_id, event_seq + offset, "interaction_pending", event_data(ia)
                )

    async def resolve(
        self,
        *,
        run_id: str,
        tenant_id: str,
        session_id: str | None,
        interaction: Interaction,
        new_rule: PermissionRule | None,
        event_seq: int,
    ) -> tuple[Interaction, bool]:
        """Store a decision or an expiry if the interaction is still pending.

        Returns what is stored and whether it is this one (`decision_id` tells a retry of
        the winner from a loser). Only the winner writes its event and session rule, in the
        transaction that decides, so the records never hold two outcomes.
        """
        ia = interaction
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "UPDATE interactions SET status = %s, decision = %s, decided_by = %s,"
                " decided_at = %s, answer = %s, decision_id = %s, approved_arguments = %s,"
                " approved_hash = %s, updated_at = now()"
                f" WHERE run_id = %s AND id = %s AND status = 'pending' RETURNING {COLUMNS}",
                (
                    ia.status,
                    ia.decision,
                    ia.decided_by,
                    ia.decided_at,
                    ia.answer,
                    ia.decision_id,
                    ia.approved_arguments,
                    ia.approved_hash,
                    run_id,
                    ia.id,
                ),
            )
            row = await cur.fetchone()
            if row is None:
                cur = await conn.execute(
                    f"SELECT {COLUMNS} FROM interactions WHERE run_id = %s AND id = %s",
                    (run_id, ia.id),
                )
                row = await cur.fetchone()
                if row is None:
                    raise LookupError(f"Run {run_id} has no stored interaction {ia.id}.")
                stored = row_to_interaction(row)
                # A retry of the request that took (runs from before decision ids: None).
                same = stored.decision_id == ia.decision_id and stored.decision == ia.decision
                return stored, same
            await put_event_in(conn, run_id, event_seq, "interaction_resolved", event_data(ia))
            if new_rule is not None and session_id is not None:
                await conn.execute(
                    "INSERT INTO session_rules (session_id, tenant_id, permission, pattern,"
                    " action, granted_by, run_id) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT DO NOTHING",
                    (
                        session_id,
                        tenant_id,
                        new_rule.permission,
                        new_rule.pattern,
                        new_rule.action,
                        ia.decided_by or "",
                        run_id,
                    ),
                )
            return row_to_interaction(row), True

    async def mark(self, run_id: str, interaction_id: str, status: str, *, when: str) -> bool:
        """Move an interaction along executing → executed | failed; False if not in `when`."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "UPDATE interactions SET status = %s, updated_at = now()"
                " WHERE run_id = %s AND id = %s AND status = %s",
                (status, run_id, interaction_id, when),
            )
            return cur.rowcount == 1

    async def status(self, run_id: str, interaction_id: str) -> str | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT status FROM interactions WHERE run_id = %s AND id = %s",
                (run_id, interaction_id),
            )
            row = await cur.fetchone()
        return str(row["status"]) if row else None

    async def pending_by_tenant(self) -> dict[str, int]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(PENDING_BY_TENANT_SQL)
            rows = await cur.fetchall()
        return {str(row["tenant_id"]): int(row["pending"]) for row in rows}

    async def for_run(self, run_id: str) -> list[Interaction]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {COLUMNS} FROM interactions WHERE run_id = %s ORDER BY step, ord",
                (run_id,),
            )
            rows = await cur.fetchall()
        return [row_to_interaction(row) for row in rows]

    async def pending_for_tenant(self, tenant_id: str, limit: int) -> list[tuple[str, Interaction]]:
        """(run id, interaction) of what the tenant's live runs wait on, oldest first."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(PENDING_FOR_TENANT_SQL, (tenant_id, limit))
            rows = await cur.fetchall()
        return [(str(row.pop("run_id")), row_to_interaction(row)) for row in rows]

    async def get(self, run_id: str, interaction_id: str) -> Interaction | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {COLUMNS} FROM interactions WHERE run_id = %s AND id = %s",
                (run_id, interaction_id),
            )
            row = await cur.fetchone()
        return row_to_interaction(row) if row else None

    async def session_rules(self, session_id: str) -> list[PermissionRule]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT permission, pattern, action FROM session_rules"
                " WHERE session_id = %s ORDER BY created_at",
                (session_id,),
            )
            rows = await cur.fetchall()
        return [PermissionRule.model_validate(row) for row in rows]
