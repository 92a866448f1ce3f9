"""Grants in Postgres: stored once per decision, listed per tenant, revoked once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from keel.workflows.gate.grants import LiveGrant, NewGrant

GRANT_COLUMNS = (
    "id, tenant_id, kind, permission, pattern, action, run_id, session_id, agent, user_ref,"
    " interaction_id, granted_by, created_at, until, revoked_at, revoked_by"
)

# One grant per decision: a retried `resolve_interaction` finds the first one.
INSERT_GRANT_SQL = (
    "INSERT INTO grants (id, tenant_id, kind, permission, pattern, run_id, session_id, agent,"
    " user_ref, interaction_id, granted_by, created_at, until)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (run_id, interaction_id) DO NOTHING"
)
GRANT_OF_DECISION_SQL = (
    f"SELECT {GRANT_COLUMNS} FROM grants WHERE run_id = %s AND interaction_id = %s"
)
GRANT_EXISTS_SQL = "SELECT 1 FROM grants WHERE id = %s"
GRANT_SQL = f"SELECT {GRANT_COLUMNS} FROM grants WHERE id = %s AND tenant_id = %s"
GRANTS_OF_TENANT_SQL = (
    f"SELECT {GRANT_COLUMNS} FROM grants WHERE tenant_id = %s"
    " AND (%s OR (revoked_at IS NULL AND (until IS NULL OR until > now())))"
    " ORDER BY created_at DESC, id LIMIT %s"
)
# Revoked once: a second revoke changes nothing and says who revoked it first.
REVOKE_GRANT_SQL = (
    "UPDATE grants SET revoked_at = now(), revoked_by = %s"
    f" WHERE id = %s AND tenant_id = %s AND revoked_at IS NULL RETURNING {GRANT_COLUMNS}"
)
# What a run about to start is covered by: its session's grants, its agent's for its user.
GRANTS_FOR_NEW_RUN_SQL = (
    f"SELECT {GRANT_COLUMNS} FROM grants WHERE tenant_id = %s"
    " AND revoked_at IS NULL AND (until IS NULL OR until > now())"
    " AND ((kind = 'session' AND session_id = %s)"
    " OR (kind = 'agent' AND agent = %s AND user_ref = %s))"
    " ORDER BY created_at, id"
)
# The runs still going that a grant covers: they hear of it, and of its revoking.
RUNS_COVERED_SQL = (
    "SELECT id FROM runs WHERE tenant_id = %s AND status IN ('queued', 'running')"
    " AND ((%s = 'run' AND id = %s) OR (%s = 'session' AND session_id = %s)"
    " OR (%s = 'agent' AND agent = %s AND requester = %s))"
)


class GrantRecord(BaseModel):
    """A grant as Postgres keeps it."""

    id: str
    tenant_id: str
    kind: str
    permission: str
    pattern: str
    action: str
    run_id: str
    session_id: str | None
    agent: str
    user_ref: str
    interaction_id: str
    granted_by: str
    created_at: datetime
    until: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None

    def live(self) -> LiveGrant:
        return LiveGrant(
            id=self.id,
            permission=self.permission,
            pattern=self.pattern,
            until=self.until,
            kind=self.kind,
            interaction_id=self.interaction_id,
        )


class GrantStore:
    """The `grants` table."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def record(self, tenant_id: str, grant: NewGrant) -> tuple[GrantRecord, bool]:
        """Store the grant a decision made (once); the stored one, and whether it is new."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                INSERT_GRANT_SQL,
                (
                    grant.id,
                    tenant_id,
                    grant.kind,
                    grant.permission,
                    grant.pattern,
                    grant.run_id,
                    grant.session_id,
                    grant.agent,
                    grant.user,
                    grant.interaction_id,
                    grant.granted_by,
                    grant.created_at,
                    grant.until,
                ),
            )
            new = cur.rowcount == 1
            cur = await conn.execute(GRANT_OF_DECISION_SQL, (grant.run_id, grant.interaction_id))
            row = await cur.fetchone()
        assert row is not None, "the grant was just stored"
        return GrantRecord.model_validate(row), new

    async def get(self, grant_id: str, tenant_id: str) -> GrantRecord | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(GRANT_SQL, (grant_id, tenant_id))
            row = await cur.fetchone()
        return GrantRecord.model_validate(row) if row else None

    async def exists(self, grant_id: str) -> bool:
        """Whether any tenant has this grant (to audit a cross-tenant attempt)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(GRANT_EXISTS_SQL, (grant_id,))
            return await cur.fetchone() is not None

    async def of_tenant(
        self, tenant_id: str, *, include_ended: bool, limit: int
    ) -> list[GrantRecord]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(GRANTS_OF_TENANT_SQL, (tenant_id, include_ended, limit))
            rows = await cur.fetchall()
        return [GrantRecord.model_validate(row) for row in rows]

    async def revoke(self, grant_id: str, tenant_id: str, by: str) -> GrantRecord | None:
        """Revoke a live grant; None if it was revoked already (or is not the tenant's)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(REVOKE_GRANT_SQL, (by, grant_id, tenant_id))
            row = await cur.fetchone()
        return GrantRecord.model_validate(row) if row else None

    async def for_new_run(
        self, tenant_id: str, session_id: str | None, agent: str, user_ref: str
    ) -> list[LiveGrant]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                GRANTS_FOR_NEW_RUN_SQL, (tenant_id, session_id, agent, user_ref)
            )
            rows = await cur.fetchall()
        return [GrantRecord.model_validate(row).live() for row in rows]

    async def runs_covered(self, grant: GrantRecord) -> list[str]:
        """Ids of the runs still going that `grant` covers."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                RUNS_COVERED_SQL,
                (
                    grant.tenant_id,
                    grant.kind,
                    grant.run_id,
                    grant.kind,
                    grant.session_id,
                    grant.kind,
                    grant.agent,
                    grant.user_ref,
                ),
            )
            rows = await cur.fetchall()
        return [str(row["id"]) for row in rows]
