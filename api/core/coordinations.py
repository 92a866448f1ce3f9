"""Coordinations: one task sent to several A2A agents, merged into one report.

Every surface starts one here, as runs start in `api.core.runs`: checked, within the
caller's tenant, idempotent on the id the caller may choose, and audited. Temporal
keeps the record: the workflow `coordinate-ID` carries its tenant, requester and the
hash of the request in its memo, so no table is needed and a retry of the same request
(same id) finds the same workflow. As for runs, an id another tenant holds is kept
under the caller's scoped key (`api.core.tenant_ids`), and reading another tenant's
coordination answers 404, audited.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.store.audit import AuditEntry
from activities.url_prefix import url_within
from api.core.context import RETRY_AFTER_S, TEMPORAL_CALL_TIMEOUT, CoreParts
from api.core.coordination_schemas import (
    CoordinationCreate,
    CoordinationPublic,
    CoordinationStatus,
)
from api.core.errors import Conflict, NotFound, Unavailable, known_id
from api.core.tenant_ids import in_view, scoped
from api.core.webhook_guard import check_webhook
from api.identity.auth import Principal
from api.identity.config import user_ref
from worker.a2a_tokens import keel_urls
from workflows.coordination import CoordinatorInput, CoordinatorResult
from workflows.coordinator import CoordinatorWorkflow

WORKFLOW_PREFIX = "coordinate-"
STATUSES: dict[WorkflowExecutionStatus, CoordinationStatus] = {
    WorkflowExecutionStatus.RUNNING: "running",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "running",
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
}
TEMPORAL_DOWN = (
    "Temporal did not answer, so the coordination was not started; retry the same "
    "request (with the same id) shortly."
)


def workflow_id(key: str) -> str:
    return f"{WORKFLOW_PREFIX}{key}"


@dataclass(frozen=True)
class Found:
    """A coordination's workflow as Temporal describes it, with its memo decoded."""

    description: WorkflowExecutionDescription
    memo: Mapping[str, Any]

    @property
    def tenant_id(self) -> object:
        return self.memo.get("tenant_id")


class CoordinationService:
    """Start and read coordinations, within the caller's tenant."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts

    async def start(self, body: CoordinationCreate, user: Principal) -> CoordinationPublic:
        """Start the coordination; the same request with the same id answers with it again,
        the same id with another request is a conflict."""
        await self._check_agents(body, user)
        chosen = body.id or uuid.uuid4().hex[:16]
        request_hash = body.request_hash(user)
        key = await self._key_for(chosen, user)
        request = CoordinatorInput(
            task=body.task,
            agents=[agent.remote() for agent in body.agents],
            tenant_id=user.tenant_id,
            requester=user_ref(user),
            timeout_s=body.timeout_s,
        )
        parts = self._parts
        try:
            await parts.temporal.start_workflow(
                CoordinatorWorkflow.run,
                request,
                id=workflow_id(key),
                task_queue=parts.settings.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                rpc_timeout=TEMPORAL_CALL_TIMEOUT,
                memo={
                    "tenant_id": user.tenant_id,
                    "requester": request.requester,
                    "request_hash": request_hash,
                },
            )
        except WorkflowAlreadyStartedError:
            existing = await self._describe(key)
            if existing is None or existing.tenant_id != user.tenant_id:
                raise Conflict(
                    "That coordination id is taken; choose another.", field="id"
                ) from None
            if existing.memo.get("request_hash") != request_hash:
                raise Conflict(
                    f"Coordination {chosen} was started by a different request; send exactly "
                    "the same request to retry it, or choose another id.",
                    field="id",
                ) from None
            return await self._public(key, existing)
        except RPCError as err:
            raise Unavailable(TEMPORAL_DOWN, retry_after_s=RETRY_AFTER_S) from err
        await parts.audit.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="run",
                action="coordination.started",
                subject=key,
                detail={"agents": [a.url for a in body.agents], "timeout_s": body.timeout_s},
            )
        )
        started = await self._describe(key)
        if started is None:
            raise Unavailable(TEMPORAL_DOWN, retry_after_s=RETRY_AFTER_S)
        return await self._public(key, started)

    async def get(self, given: str, user: Principal) -> CoordinationPublic:
        """The coordination, if the caller's tenant owns it; 404 otherwise, audited."""
        known_id(given, "coordination")
        for key in (scoped(user.tenant_id, given), given):
            found = await self._describe(key)
            if found is None:
                continue
            if found.tenant_id == user.tenant_id:
                return await self._public(key, found)
            await self._parts.audit.cross_tenant(user, "coordination", given)
            break
        raise NotFound(f"No coordination {given}.")

    async def _check_agents(self, body: CoordinationCreate, user: Principal) -> None:
        """Each agent's URL leads where the operator lets webhooks go, or to Keel's own API:
        the worker fetches its card and posts the task there (and checks again then)."""
        own = keel_urls(self._parts.settings)
        for index, agent in enumerate(body.agents):
            if any(url_within(agent.url, mine) for mine in own):
                continue
            await check_webhook(
                self._parts, agent.url, user, field=f"agents.{index}.url", what="A2A agent"
            )

    async def _key_for(self, chosen: str, user: Principal) -> str:
        """The id itself, unless another tenant holds it: then the caller's scoped key."""
        mine = scoped(user.tenant_id, chosen)
        if await self._describe(mine) is not None:
            return mine
        held = await self._describe(chosen)
        if held is not None and held.tenant_id != user.tenant_id:
            return mine
        return chosen

    async def _describe(self, key: str) -> Found | None:
        handle = self._parts.temporal.get_workflow_handle(workflow_id(key))
        try:
            description = await handle.describe(rpc_timeout=TEMPORAL_CALL_TIMEOUT)
            return Found(description, await description.memo())
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise Unavailable(
                "Temporal did not answer; ask again shortly.", retry_after_s=RETRY_AFTER_S
            ) from err

    async def _public(self, key: str, found: Found) -> CoordinationPublic:
        described = found.description
        status = STATUSES.get(described.status or WorkflowExecutionStatus.RUNNING, "running")
        public = CoordinationPublic(
            id=in_view(str(found.tenant_id), key),
            status=status,
            requester=str(found.memo.get("requester", "")),
            created_at=described.start_time,
            finished_at=described.close_time,
        )
        if status == "completed":
            handle = self._parts.temporal.get_workflow_handle(
                workflow_id(key), result_type=CoordinatorResult
            )
            try:
                result = await handle.result(rpc_timeout=TEMPORAL_CALL_TIMEOUT)
            except RPCError as err:
                raise Unavailable(
                    "Temporal did not answer; ask again shortly.", retry_after_s=RETRY_AFTER_S
                ) from err
            public.report, public.outcomes = result.report, result.outcomes
            public.findings = result.findings
        elif status != "running":
            public.error = f"The coordination ended {status} in Temporal; start it again."
        return public
