"""Coordinations: one task sent to several A2A agents, merged into one report.

Every surface starts one here, as runs start in `api.core.runs`: checked, within the
caller's tenant, idempotent on the id the caller may choose, and audited. Temporal
keeps the record: the workflow `coordinate-ID` carries its tenant, requester and the
hash of the request in its memo, so no table is needed and a retry of the same request
(same id) finds the same workflow. As for runs, an id another tenant holds is kept
under the caller's scoped key (`api.core.tenant_ids`), and reading or cancelling another
tenant's coordination answers 404, audited.

Listing asks Temporal's visibility for the coordinator's workflows tagged with the
caller's tenant (the `KeelTenant` search attribute runs carry too), or with no tenant tag
(those started before coordinations carried it), and keeps only those whose memo names
the caller's tenant: the memo decides, the query only narrows. Temporal does not order a
list by start time, so a page is sorted here by (start time, key), newest first, and its
cursor is the last one shown; a coordination started a moment ago may take a second to
be listed (visibility is eventually consistent).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from keel.activities.outbound.url_prefix import url_within
from keel.activities.store.audit import AuditEntry
from keel.api.core.context import RETRY_AFTER_S, TEMPORAL_CALL_TIMEOUT, CoreParts
from keel.api.core.coordinations.schemas import (
    AgentChoice,
    CoordinationCreate,
    CoordinationList,
    CoordinationPublic,
    CoordinationStatus,
)
from keel.api.core.errors import Conflict, Invalid, KeelError, NotFound, Unavailable, known_id
from keel.api.core.page_cursor import encode_cursor
from keel.api.core.temporal_errors import (
    from_temporal,
    namespace_missing,
    search_attributes_missing,
    temporal_refusals,
)
from keel.api.core.tenant_ids import in_view, scoped
from keel.api.core.webhook_guard import check_webhook
from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref
from keel.worker.config.a2a_tokens import keel_urls
from keel.workflows.coordinator.models import CoordinatorInput, CoordinatorResult
from keel.workflows.coordinator.workflow import CoordinatorWorkflow
from keel.workflows.run.fair_share import tenant_priority
from keel.workflows.run.run_visibility import KEEL_TENANT

WORKFLOW_PREFIX = "coordinate-"
WORKFLOW_TYPE = "CoordinatorWorkflow"  # the name in its @workflow.defn
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
TEMPORAL_SLOW = "Temporal did not answer; ask again shortly."
# A tenant id this plain can be quoted in a visibility query as it is; any other is
# matched on the memo alone (the list is then read across tenants, and filtered here).
QUOTABLE_TENANT = re.compile(r"^[A-Za-z0-9_.@:~+-]+$")
# Describes in flight at once while listing.
LIST_CONCURRENCY = 8


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


@temporal_refusals("serve the coordination")
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
                priority=tenant_priority(user.tenant_id),
                memo={
                    "tenant_id": user.tenant_id,
                    "requester": request.requester,
                    "request_hash": request_hash,
                    "agents": [agent.model_dump(mode="json") for agent in body.agents],
                },
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(KEEL_TENANT, user.tenant_id)]
                ),
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
            raise from_temporal(
                err, doing="start the coordination", namespace=parts.namespace, retry=TEMPORAL_DOWN
            ) from err
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
        key, found = await self._owned(given, user)
        return await self._public(key, found)

    async def page(
        self, user: Principal, *, limit: int, before: tuple[datetime, str] | None
    ) -> CoordinationList:
        """The caller's tenant's coordinations, newest first, after the cursor's one."""
        if before is not None:
            before = (_aware(before[0]), before[1])
        started: dict[str, datetime] = {}  # by key: an id's runs are one coordination
        try:
            async for execution in self._parts.temporal.list_workflows(
                _list_query(user.tenant_id, before), rpc_timeout=TEMPORAL_CALL_TIMEOUT
            ):
                if not execution.id.startswith(WORKFLOW_PREFIX):
                    continue
                if (await execution.memo()).get("tenant_id") != user.tenant_id:
                    continue
                key = execution.id.removeprefix(WORKFLOW_PREFIX)
                started[key] = max(execution.start_time, started.get(key, execution.start_time))
        except RPCError as err:
            if err.status == RPCStatusCode.INVALID_ARGUMENT and not search_attributes_missing(err):
                raise _bad_cursor() from err
            raise self._refused(err, "list coordinations") from err
        places = [(at, key) for key, at in started.items() if before is None or (at, key) < before]
        places.sort(reverse=True)
        shown, more = places[:limit], len(places) > limit
        gate = asyncio.Semaphore(LIST_CONCURRENCY)

        async def read(key: str) -> CoordinationPublic | None:
            async with gate:
                found = await self._describe(key)
                return None if found is None else await self._public(key, found)

        listed = await asyncio.gather(*(read(key) for _, key in shown))
        return CoordinationList(
            coordinations=[c for c in listed if c is not None],
            next_cursor=encode_cursor(*shown[-1]) if more else None,
        )

    async def cancel(self, given: str, user: Principal) -> CoordinationPublic:
        """Ask a running coordination to cancel; answers it as it is now (`cancelling` until
        its workflow has ended, `cancelled` then). Asking again while it is cancelling
        answers the same; one that has ended is a conflict."""
        key, found = await self._owned(given, user)
        now = await self._public(key, found)
        if now.status == "cancelling":
            return now
        if now.status != "running":
            raise Conflict(
                f"Coordination {given} has already ended ({now.status}); there is nothing "
                "to cancel."
            )
        handle = self._parts.temporal.get_workflow_handle_for(
            CoordinatorWorkflow.run, workflow_id(key)
        )
        try:
            await handle.cancel(rpc_timeout=TEMPORAL_CALL_TIMEOUT)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND or namespace_missing(err):
                raise self._refused(err, "cancel the coordination") from err
            ended = await self.get(given, user)  # it ended a moment ago
            raise Conflict(
                f"Coordination {given} has already ended ({ended.status}); there is nothing "
                "to cancel."
            ) from None
        await self._parts.audit.log.append(
            AuditEntry(
                tenant_id=user.tenant_id,
                actor=user.subject,
                category="run",
                action="coordination.cancel_requested",
                subject=key,
            )
        )
        return await self.get(given, user)

    async def _owned(self, given: str, user: Principal) -> tuple[str, Found]:
        """The key and workflow of the caller's coordination `given`; `NotFound` otherwise,
        audited when another tenant's holds the id."""
        known_id(given, "coordination")
        for key in (scoped(user.tenant_id, given), given):
            found = await self._describe(key)
            if found is None:
                continue
            if found.tenant_id == user.tenant_id:
                return key, found
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

    def _refused(self, err: RPCError, doing: str) -> KeelError:
        return from_temporal(err, doing=doing, namespace=self._parts.namespace, retry=TEMPORAL_SLOW)

    async def _describe(self, key: str) -> Found | None:
        handle = self._parts.temporal.get_workflow_handle(workflow_id(key))
        try:
            description = await handle.describe(rpc_timeout=TEMPORAL_CALL_TIMEOUT)
            return Found(description, await description.memo())
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND and not namespace_missing(err):
                return None
            raise self._refused(err, "read the coordination") from err

    async def _public(self, key: str, found: Found) -> CoordinationPublic:
        described = found.description
        status = STATUSES.get(described.status or WorkflowExecutionStatus.RUNNING, "running")
        extended = described.raw_description.workflow_extended_info
        if status == "running" and extended.cancel_requested:
            status = "cancelling"
        public = CoordinationPublic(
            id=in_view(str(found.tenant_id), key),
            status=status,
            requester=str(found.memo.get("requester", "")),
            created_at=described.start_time,
            finished_at=described.close_time,
            agents=[AgentChoice.model_validate(a) for a in found.memo.get("agents", [])],
        )
        if status == "completed":
            handle = self._parts.temporal.get_workflow_handle(
                workflow_id(key), result_type=CoordinatorResult
            )
            try:
                result = await handle.result(rpc_timeout=TEMPORAL_CALL_TIMEOUT)
            except RPCError as err:
                raise self._refused(err, "read the coordination's report") from err
            public.report, public.outcomes = result.report, result.outcomes
            public.findings = result.findings
            if not public.agents:  # started before its agents were in the memo
                public.agents = [AgentChoice(url=o.url, name=o.agent_name) for o in result.outcomes]
        elif status == "cancelled":
            public.error = "The coordination was cancelled; start it again to have its report."
        elif status not in ("running", "cancelling"):
            public.error = f"The coordination ended {status} in Temporal; start it again."
        return public


def _list_query(tenant_id: str, before: tuple[datetime, str] | None) -> str:
    """The visibility query that narrows a list to the tenant's coordinations (the memo
    still decides) from the cursor's start time on."""
    clauses = [f"WorkflowType = '{WORKFLOW_TYPE}'"]
    if QUOTABLE_TENANT.match(tenant_id):
        clauses.append(f"({KEEL_TENANT.name} = '{tenant_id}' OR {KEEL_TENANT.name} IS NULL)")
    if before is not None:
        # Temporal keeps nanoseconds, a cursor microseconds: the last microsecond's too.
        clauses.append(f"StartTime <= '{_just_after(before[0]).isoformat()}'")
    return " AND ".join(clauses)


def _just_after(stamp: datetime) -> datetime:
    try:
        return stamp + timedelta(microseconds=1)
    except OverflowError:  # the end of time: nothing starts after it anyway
        return stamp


def _aware(stamp: datetime) -> datetime:
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _bad_cursor() -> Invalid:
    return Invalid(
        "Malformed cursor; pass back the `next_cursor` of the previous page unchanged.",
        field="cursor",
        where="query",
    )
