"""The router's tables: the agents each tenant enables for it, and its decisions.

A decision is written with its `route_decision` event, its audit entry and the router
run's message (the hand-over `task` call, or the report) in one transaction, keyed by
`(run_id, round)`: a retried activity writes nothing twice.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from keel.activities.store.audit import AuditEntry, AuditLog
from keel.activities.store.event_rows import put_event_in
from keel.activities.store.llm_call_rows import RECORD_LLM_CALL_SQL
from keel.activities.store.postgres_text import sha256_text, storable, storable_json
from keel.workflows.router.models import RecordRouteInput

TENANT_AGENTS_SQL = (
    "SELECT agents, updated_by, updated_at FROM router_tenant_agents WHERE tenant_id = %s"
)
UPSERT_TENANT_AGENTS_SQL = (
    "INSERT INTO router_tenant_agents (tenant_id, agents, updated_by) VALUES (%s, %s, %s)"
    " ON CONFLICT (tenant_id) DO UPDATE SET agents = excluded.agents,"
    " updated_by = excluded.updated_by, updated_at = now()"
    " RETURNING agents, updated_by, updated_at"
)
DELETE_TENANT_AGENTS_SQL = "DELETE FROM router_tenant_agents WHERE tenant_id = %s"
INSERT_DECISION_SQL = (
    "INSERT INTO route_decisions (run_id, round, tenant_id, requester, outcome, agent, reason,"
    " question, candidates, excluded, classification)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
DECISIONS_SQL = (
    "SELECT run_id, round, outcome, agent, reason, question, candidates, excluded,"
    " classification, created_at FROM route_decisions WHERE run_id = %s ORDER BY round"
)
INSERT_MESSAGE_SQL = (
    "INSERT INTO messages (run_id, step, ord, role, content, tool_calls, sha256)"
    " VALUES (%s, %s, 1, 'assistant', %s, %s, %s) ON CONFLICT DO NOTHING"
)


class TenantAgents(BaseModel):
    """The agents a tenant enabled for the router, when an admin set them."""

    agents: list[str]
    updated_by: str
    updated_at: datetime


class StoredRouteDecision(BaseModel):
    """One round of a router run, as stored."""

    run_id: str
    round: int
    outcome: str
    agent: str | None
    reason: str
    question: str | None
    candidates: list[str]
    excluded: list[dict[str, str]]
    classification: dict[str, Any]
    created_at: datetime

    def for_caller(self) -> StoredRouteDecision:
        """The row without the names of agents the caller's roles exclude (`caller_view`)."""
        agent, excluded, classification = caller_view(
            self.agent, self.excluded, self.classification
        )
        return self.model_copy(
            update={"agent": agent, "excluded": excluded, "classification": classification}
        )


def caller_view(
    agent: str | None, excluded: list[dict[str, str]], classification: dict[str, Any]
) -> tuple[str | None, list[dict[str, str]], dict[str, Any]]:
    """A decision as its caller sees it: no name of an agent their roles exclude.

    The stored row and the audit entry keep every name, for admins; the caller's
    `route_decision` event and their `GET /v1/runs/{id}/route` show this view.
    """
    hidden = {e["name"] for e in excluded if e.get("reason") == "role"}
    shown = dict(classification)
    if shown.get("agent") in hidden:
        shown["agent"], shown["reason"] = None, ""
    kept = [e for e in excluded if e.get("reason") != "role"]
    return (None if agent in hidden else agent), kept, shown


def handover_call(record: RecordRouteInput, prompt: str) -> dict[str, object]:
    """The router's `task` call a routed child reads its agent and prompt from."""
    arguments = {"agent": record.decision.agent, "prompt": prompt}
    return {
        "id": f"route-{record.round}",
        "type": "function",
        "function": {"name": "task", "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def report_of(record: RecordRouteInput) -> str:
    """The router run's report when the decision ends it (refused or route only)."""
    decision = record.decision
    if decision.outcome == "route_only":
        return f"Route: {decision.agent}\n\n{decision.reason}"
    return f"Refused: {decision.reason}"


def _admin_entry(tenant_id: str, actor: str, action: str, detail: dict[str, Any]) -> AuditEntry:
    """An admin's change to the tenant's router, as the audit records it."""
    return AuditEntry(
        tenant_id=tenant_id,
        actor=actor.removeprefix("user:"),
        category="admin",
        action=action,
        subject=tenant_id,
        detail=detail,
    )


class RouterStore:
    """Tenant settings and decisions of the router."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    async def tenant_agents(self, tenant_id: str) -> TenantAgents | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(TENANT_AGENTS_SQL, (tenant_id,))
            row = await cur.fetchone()
        return TenantAgents.model_validate(row) if row else None

    async def set_tenant_agents(
        self, tenant_id: str, agents: list[str], actor: str, admin_tenant: str
    ) -> TenantAgents:
        """Set the tenant's agents, audited in the same transaction."""
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(UPSERT_TENANT_AGENTS_SQL, (tenant_id, agents, actor))
            row = await cur.fetchone()
            assert row is not None
            await AuditLog.append_in(
                conn,
                _admin_entry(
                    tenant_id,
                    actor,
                    "router.agents_set",
                    {"agents": list(agents), "admin_tenant": admin_tenant},
                ),
            )
        return TenantAgents.model_validate(row)

    async def clear_tenant_agents(self, tenant_id: str, actor: str, admin_tenant: str) -> bool:
        """Back to the default (every catalogue agent); False if nothing was set."""
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(DELETE_TENANT_AGENTS_SQL, (tenant_id,))
            if cur.rowcount == 0:
                return False
            await AuditLog.append_in(
                conn,
                _admin_entry(
                    tenant_id, actor, "router.agents_cleared", {"admin_tenant": admin_tenant}
                ),
            )
        return True

    async def record(self, record: RecordRouteInput, prompt: str) -> None:
        """The decision, its event, its audit entry and its message, once per round."""
        decision = record.decision
        classification = record.classification.model_dump(mode="json", exclude={"tokens"})
        excluded = [e.model_dump(mode="json") for e in record.excluded]
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                INSERT_DECISION_SQL,
                (
                    record.run_id,
                    record.round,
                    record.tenant_id,
                    record.requester,
                    decision.outcome,
                    decision.agent,
                    storable(decision.reason),
                    storable(decision.question) if decision.question else None,
                    Jsonb(storable_json(record.candidates)),
                    Jsonb(storable_json(excluded)),
                    Jsonb(storable_json(classification)),
                ),
            )
            if cur.rowcount == 0:
                return  # a retry: this round is on record
            await self._message(conn, record, prompt)
            agent, shown, shown_classification = caller_view(
                decision.agent, excluded, classification
            )
            await put_event_in(
                conn,
                record.run_id,
                record.event_seq,
                "route_decision",
                {
                    "round": record.round,
                    "outcome": decision.outcome,
                    "agent": agent,
                    "reason": decision.reason,
                    "question": decision.question,
                    "candidates": list(record.candidates),
                    "excluded": shown,
                    "classification": shown_classification,
                },
            )
            await AuditLog.append_in(
                conn,
                AuditEntry(
                    tenant_id=record.tenant_id,
                    actor=record.requester.removeprefix("user:"),
                    category="router",
                    action=f"route.{decision.outcome}",
                    severity="warning" if decision.outcome == "refused" else "info",
                    subject=f"{record.run_id}/{record.round}",
                    detail={
                        "agent": decision.agent,
                        "reason": decision.reason,
                        "candidates": list(record.candidates),
                        "excluded": excluded,  # type: ignore[dict-item]
                        "classification": record.classification.kind,
                    },
                ),
            )

    async def _message(
        self, conn: AsyncConnection[dict[str, Any]], record: RecordRouteInput, prompt: str
    ) -> None:
        outcome = record.decision.outcome
        if outcome == "clarifying":
            return  # the question is an interaction, not a message
        if outcome == "routed":
            content, calls = "", [handover_call(record, prompt)]
        else:
            content, calls = report_of(record), None
        await conn.execute(
            INSERT_MESSAGE_SQL,
            (
                record.run_id,
                record.round,
                storable(content),
                Jsonb(storable_json(calls)) if calls is not None else None,
                sha256_text(content),
            ),
        )

    async def record_call(
        self,
        *,
        run_id: str,
        step: int,
        model: str,
        tokens: tuple[int, int],
        latency_ms: int,
        attempt: int,
        cost_usd: float,
    ) -> None:
        """The classification's trace in `llm_calls`, its tokens and cost on the run."""
        async with self._pool.connection() as conn:
            await conn.execute(
                RECORD_LLM_CALL_SQL,
                {
                    "run": run_id,
                    "step": step,
                    "model": model,
                    "prompt": tokens[0],
                    "completion": tokens[1],
                    "latency": latency_ms,
                    "attempt": attempt,
                    "finish": "route",
                    "cost": cost_usd,
                    "estimated": 0,
                    "fallback_from": None,
                    "fallback_reason": None,
                },
            )

    async def put_report(self, run_id: str, step: int, report: str) -> None:
        """The router run's final message: its routed child's report."""
        async with self._pool.connection() as conn:
            await conn.execute(
                INSERT_MESSAGE_SQL, (run_id, step, storable(report), None, sha256_text(report))
            )

    async def decisions(self, run_id: str) -> list[StoredRouteDecision]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(DECISIONS_SQL, (run_id,))
            rows = await cur.fetchall()
        return [StoredRouteDecision.model_validate(r) for r in rows]
