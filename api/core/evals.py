"""Eval results: `keel eval` records what it found with the Keel its runs ran on, and
the console lists them. Written once per id: a retry with the same report is the same
result, another report under a taken id is a conflict."""

from __future__ import annotations

import hashlib

from keel.activities.store.eval_store import EvalRow, EvalStore
from keel.api.core.context import CoreParts
from keel.api.core.errors import Conflict, NotFound, known_id
from keel.api.core.schemas.evals import EvalResultCreate, EvalResultPublic, EvalResultSummary
from keel.api.evals.results import EvalReport
from keel.api.identity.auth import Principal

__all__ = ["EvalService"]


class EvalService:
    """Record, list and read the caller's tenant's eval results."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        self._store = EvalStore(parts.store.pool)

    async def record(self, body: EvalResultCreate, user: Principal) -> EvalResultPublic:
        report = body.report.model_dump_json()
        digest = hashlib.sha256(report.encode()).hexdigest()
        row = EvalRow(
            tenant_id=user.tenant_id,
            id=body.id,
            requester=user.subject,
            recorded_at=body.report.finished_at,  # the store's clock sets the stored one
            started_at=body.report.started_at,
            finished_at=body.report.finished_at,
            repeat=body.report.repeat,
            scenarios=len(body.report.scenarios),
            passed=sum(body.report.passed(s) for s in body.report.scenarios),
            report_sha256=digest,
            report=report,
        )
        stored = await self._store.put(row)
        if stored.report_sha256 != digest:
            raise Conflict(
                f"Eval result {body.id} is already recorded with another report; "
                "record this one under a new id.",
                field="id",
            )
        return _public(stored)

    async def recent(self, user: Principal, limit: int) -> list[EvalResultSummary]:
        rows = await self._store.recent(user.tenant_id, limit)
        return [EvalResultSummary.model_validate(r.model_dump()) for r in rows]

    async def get(self, eval_id: str, user: Principal) -> EvalResultPublic:
        row = await self._store.get(user.tenant_id, known_id(eval_id, "eval"))
        if row is None:
            if await self._store.held_elsewhere(user.tenant_id, eval_id):
                await self._parts.audit.cross_tenant(user, "eval", eval_id)
            raise NotFound(f"No eval result {eval_id}.")
        return _public(row)


def _public(row: EvalRow) -> EvalResultPublic:
    summary = row.model_dump(exclude={"report", "tenant_id", "report_sha256"})
    return EvalResultPublic(**summary, report=EvalReport.model_validate_json(row.report))
