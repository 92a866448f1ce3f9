"""Retention: per-tenant policies, and the batches that empty runs older than them.

A policy keeps a tenant's finished runs' contents for `days` days. A sweep removes,
for runs finished before then, everything they hold: messages (tool outputs among
them), events, LLM call traces, interactions (the arguments approved), context
summaries, execution claims, MCP tool lists and A2A push configs, and blanks the run
row's input, report, findings and error. The row itself stays (status, usage, cost,
lineage), marked `purged_at`, so usage totals and the run's place in its session and
tree are kept. Texts (`run_texts`) go when no run has used them for as long, and so
do eval results (`eval_results`, whose reports quote their runs' inputs and answers)
recorded before the cutoff.

The audit log is never touched: it is append-only and hash-chained, and a sweep
appends to it. Each batch is one transaction that removes the rows and appends a
`retention.purged` entry to the tenant's chain naming what went (run ids, row counts,
the cutoff) and the head of a digest chain over everything each sweep removed, so the
log still verifies and says what is gone. The hash of that entry is also kept in
`tenant_retention`, outside the log, as an anchor to compare the chain's end with.

Agent memories (`memories`) of the tenant not stated again since the cutoff go too,
counted in the batch's rows (`memories`): a memory is the tenant's data like a run's
contents, and a fact the user restates is refreshed, so it stays.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field

from keel.activities.store.audit import AuditEntry, AuditLog

__all__ = ["PurgedBatch", "RetentionPolicy", "RetentionStore"]

# The first link of a tenant's removal digest chain.
REMOVED_GENESIS = "0" * 64

# Run contents by table; each row names its run in `run_id`. Order matters only for
# reading the counts.
RUN_CONTENT_TABLES = (
    "messages",
    "events",
    "llm_calls",
    "interactions",
    "context_summaries",
    "tool_executions",
    "mcp_tools",
    "a2a_push_configs",
    # An output a plugin's tool.after hooks never released (they kept failing).
    "held_tool_outputs",
    # The router's decisions: their reasons and questions quote the request.
    "route_decisions",
    # The findings ledger (migration 022): titles and details quote the code.
    "run_findings",
    # Secrets users gave that no activity took (migration 029): sealed, still theirs.
    "secret_refs",
    # Sealed originals of masked values (migration 030): personal data, kept no longer.
    "masked_originals",
)

POLICIES_SQL = (
    "SELECT tenant_id, days, updated_by, updated_at, last_swept_at, runs_purged,"
    " removed_head, last_audit_hash FROM tenant_retention"
)
UPSERT_POLICY_SQL = (
    "INSERT INTO tenant_retention (tenant_id, days, updated_by) VALUES (%s, %s, %s)"
    " ON CONFLICT (tenant_id) DO UPDATE SET days = excluded.days,"
    " updated_by = excluded.updated_by, updated_at = now()"
)
# The oldest finished runs of one tenant past its cutoff, locked so two sweeps never
# take the same ones.
EXPIRED_RUNS_SQL = (
    "SELECT id, finished_at FROM runs"
    " WHERE tenant_id = %s AND purged_at IS NULL"
    " AND status IN ('completed', 'failed', 'cancelled') AND finished_at < %s"
    " ORDER BY finished_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
)
PURGE_RUN_ROWS_SQL = (
    "UPDATE runs SET purged_at = now(), input = '', report = NULL, error = NULL,"
    " findings = NULL WHERE id = ANY(%s)"
)
# Memories (migration 019) not stated again since the cutoff: a memory is the tenant's
# data like a run's contents, and a restated fact is refreshed, so it stays.
EXPIRED_MEMORIES_SQL = (
    "DELETE FROM memories WHERE ctid IN (SELECT ctid FROM memories"
    " WHERE tenant_id = %s AND updated_at < %s LIMIT %s)"
)
# Texts no run has stored or used since the cutoff (every use stores them again,
# which refreshes `created_at`).
EXPIRED_TEXTS_SQL = (
    "DELETE FROM run_texts WHERE ctid IN (SELECT ctid FROM run_texts"
    " WHERE tenant_id = %s AND created_at < %s LIMIT %s)"
)
# Eval results the tenant recorded before the cutoff (by the API's clock: `recorded_at`).
EXPIRED_EVALS_SQL = (
    "DELETE FROM eval_results WHERE ctid IN (SELECT ctid FROM eval_results"
    " WHERE tenant_id = %s AND recorded_at < %s LIMIT %s)"
)
RECORD_SWEEP_SQL = (
    "UPDATE tenant_retention SET last_swept_at = now(), runs_purged = runs_purged + %s,"
    " removed_head = %s, last_audit_hash = %s WHERE tenant_id = %s"
)


class RetentionPolicy(BaseModel):
    """How long a tenant's finished runs keep their contents, and its last sweep."""

    tenant_id: str
    days: int = Field(description="Finished runs older than this many days are emptied.")
    updated_by: str
    updated_at: datetime
    last_swept_at: datetime | None = None
    runs_purged: int = Field(default=0, description="Runs emptied by every sweep so far.")
    removed_head: str | None = Field(
        default=None, description="Head of the digest chain over everything removed."
    )
    last_audit_hash: str | None = Field(
        default=None, description="Hash of the audit entry of the last batch removed."
    )


class PurgedBatch(BaseModel):
    """What one batch removed for one tenant."""

    tenant_id: str
    runs: list[str] = Field(default_factory=list)
    rows: dict[str, int] = Field(default_factory=dict)
    texts: int = 0
    evals: int = 0


class RetentionStore:
    """Policies and purges, in Postgres."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[Any]]) -> None:
        self._pool = pool

    async def policies(self) -> list[RetentionPolicy]:
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(POLICIES_SQL + " ORDER BY tenant_id")
            return [RetentionPolicy.model_validate(row) for row in await cur.fetchall()]

    async def policy(self, tenant_id: str) -> RetentionPolicy | None:
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(POLICIES_SQL + " WHERE tenant_id = %s", (tenant_id,))
            row = await cur.fetchone()
        return RetentionPolicy.model_validate(row) if row else None

    async def set_policy(self, tenant_id: str, days: int, actor: str) -> RetentionPolicy:
        """Set (or change) a tenant's policy; audited in the same transaction."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(UPSERT_POLICY_SQL, (tenant_id, days, actor))
            await AuditLog.append_in(conn, _policy_entry(tenant_id, actor, "set", days))
        policy = await self.policy(tenant_id)
        assert policy is not None
        return policy

    async def clear_policy(self, tenant_id: str, actor: str) -> bool:
        """Keep the tenant's runs for ever again; False when it had no policy."""
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "DELETE FROM tenant_retention WHERE tenant_id = %s", (tenant_id,)
            )
            if cur.rowcount == 0:
                return False
            await AuditLog.append_in(conn, _policy_entry(tenant_id, actor, "cleared", None))
        return True

    async def purge_batch(self, now: datetime, batch_size: int) -> list[PurgedBatch]:
        """Empty up to `batch_size` expired runs of each tenant with a policy."""
        batches: list[PurgedBatch] = []
        for policy in await self.policies():
            batch = await self._purge_tenant(policy, now - timedelta(days=policy.days), batch_size)
            if batch.runs or batch.texts or batch.evals or batch.rows:
                batches.append(batch)
        return batches

    async def _purge_tenant(
        self, policy: RetentionPolicy, cutoff: datetime, batch_size: int
    ) -> PurgedBatch:
        tenant = policy.tenant_id
        async with self._pool.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(EXPIRED_RUNS_SQL, (tenant, cutoff, batch_size))
            expired = await cur.fetchall()
            run_ids = [row["id"] for row in expired]
            rows: dict[str, int] = {}
            if run_ids:
                for table in RUN_CONTENT_TABLES:
                    deleted = await conn.execute(
                        sql.SQL("DELETE FROM {} WHERE run_id = ANY(%s)").format(
                            sql.Identifier(table)
                        ),
                        (run_ids,),
                    )
                    rows[table] = deleted.rowcount
                await conn.execute(PURGE_RUN_ROWS_SQL, (run_ids,))
            texts = (await conn.execute(EXPIRED_TEXTS_SQL, (tenant, cutoff, batch_size))).rowcount
            evals = (await conn.execute(EXPIRED_EVALS_SQL, (tenant, cutoff, batch_size))).rowcount
            memories = await conn.execute(EXPIRED_MEMORIES_SQL, (tenant, cutoff, batch_size))
            if memories.rowcount:
                rows["memories"] = memories.rowcount
            batch = PurgedBatch(tenant_id=tenant, runs=run_ids, rows=rows, texts=texts, evals=evals)
            if not run_ids and not texts and not evals and not memories.rowcount:
                return batch
            # The policy's row lock serialises batches of one tenant, so links never fork.
            await cur.execute(
                "SELECT removed_head FROM tenant_retention WHERE tenant_id = %s FOR UPDATE",
                (tenant,),
            )
            previous = await cur.fetchone()
            head = _next_head(
                (previous or {}).get("removed_head") or REMOVED_GENESIS, batch, cutoff
            )
            record = await AuditLog.append_in(conn, _purge_entry(batch, cutoff, policy, head))
            await conn.execute(RECORD_SWEEP_SQL, (len(run_ids), head, record.hash, tenant))
        return batch


def _next_head(previous: str, batch: PurgedBatch, cutoff: datetime) -> str:
    """The removal chain's next link: what this batch removed, bound to the last link."""
    content = json.dumps(
        {
            "prev": previous,
            "tenant": batch.tenant_id,
            "cutoff": cutoff.isoformat(),
            "runs": batch.runs,
            "rows": batch.rows,
            "texts": batch.texts,
            # Only when some went, so the links of batches without any read as before.
            **({"evals": batch.evals} if batch.evals else {}),
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(content.encode()).hexdigest()


def _purge_entry(
    batch: PurgedBatch, cutoff: datetime, policy: RetentionPolicy, head: str
) -> AuditEntry:
    return AuditEntry(
        tenant_id=batch.tenant_id,
        actor="system",
        category="retention",
        action="retention.purged",
        subject=f"{len(batch.runs)} runs",
        detail={
            "days": policy.days,
            "cutoff": cutoff.isoformat(),
            "runs": list(batch.runs),
            "rows": dict(batch.rows),
            "texts": batch.texts,
            "evals": batch.evals,
            "removed_head": head,
        },
    )


def _policy_entry(tenant_id: str, actor: str, what: str, days: int | None) -> AuditEntry:
    return AuditEntry(
        tenant_id=tenant_id,
        actor=actor,
        category="retention",
        action=f"retention.policy_{what}",
        subject=tenant_id,
        detail={"days": days},
    )
