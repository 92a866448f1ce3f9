"""/v1/runs: start runs, read them, cancel them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from keel.api.core.page_cursor import decode_cursor, encode_cursor
from keel.api.core.run_list import ChildScope
from keel.api.core.run_orders import RunOrder
from keel.api.core.schemas.common import StoredText
from keel.api.core.schemas.forks import ForkCreate
from keel.api.core.schemas.runs import RunCreate, RunList, RunPublic
from keel.api.core.schemas.usage import tree_usage_public
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=AUTHENTICATED)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=RunPublic,
    responses=documented(409, 429, 503),
)
async def create_run(body: RunCreate, user: CurrentUser, service: ServiceDep) -> RunPublic:
    """Start a run; with `session_id`, the run joins that session (created if new). The
    same request again (same `run_id`) answers with the same run; the same `run_id` with
    another request is a 409. A 503 (with Retry-After) started nothing: retry it. A 429
    (with Retry-After): the tenant is over a quota until the time the detail names."""
    started = await service.runs.start(RunOrder.from_create(body), user)
    return RunPublic.from_record(started.record)


@router.post(
    "/{run_id}/fork",
    status_code=status.HTTP_201_CREATED,
    response_model=RunPublic,
    responses=documented(404, 409, 503),
)
async def fork_run(
    run_id: StoredText, body: ForkCreate, user: CurrentUser, service: ServiceDep
) -> RunPublic:
    """Start a new run from this run's conversation up to and including `step` (and a new
    user message): same agent, model and workspace; the original is left as it is. A
    step the run does not have is a 422; the same request with the same `run_id` answers
    with the same fork (docs/forks.md)."""
    started = await service.forks.fork(run_id, body, user)
    return RunPublic.from_record(started.record)


@router.post("/{run_id}/cancel", response_model=RunPublic, responses=documented(404, 409))
async def cancel_run(run_id: StoredText, user: CurrentUser, service: ServiceDep) -> RunPublic:
    """Cancel a run: a queued one leaves its session's queue, a live one is cancelled."""
    public = RunPublic.from_record(await service.runs.cancel(run_id, user))
    if public.status != "cancelled":
        public.status = "cancelling"
    return public


@router.get("", response_model=RunList, responses=documented(404))
async def list_runs(
    service: ServiceDep,
    user: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    status_: Annotated[StoredText | None, Query(alias="status", max_length=32)] = None,
    agent: Annotated[StoredText | None, Query(max_length=64)] = None,
    trigger: Annotated[StoredText | None, Query(max_length=32)] = None,
    schedule: Annotated[StoredText | None, Query(max_length=200)] = None,
    children: Annotated[
        ChildScope,
        Query(description="`exclude` (default): top-level runs only; `include`: sub-agents too."),
    ] = "exclude",
    parent: Annotated[
        StoredText | None,
        Query(
            min_length=1,
            max_length=512,
            description="List the sub-agent runs this run started (404 if it is not yours).",
        ),
    ] = None,
) -> RunList:
    """Newest first; top-level runs only (each with its `child_count`) unless `children=include`
    or `parent=RUN_ID` (that run's sub-agent runs). A live run that waits on a person is
    `waiting`. Filter by status (`waiting` too), agent, trigger (`api`,
    `schedule`, …) or schedule id; pass `next_cursor` as `cursor` with the same filters."""
    before = decode_cursor(cursor) if cursor else None
    page = await service.run_list.page(
        user,
        limit=limit,
        before=before,
        children=children,
        parent=parent,
        status=status_,
        agent=agent,
        trigger=trigger,
        schedule_id=schedule,
    )
    runs = page.runs
    next_cursor = encode_cursor(runs[-1].created_at, runs[-1].id) if len(runs) == limit else None
    listed = [
        RunPublic.from_record(r).model_copy(
            update={
                "child_count": page.child_counts.get(r.id, 0),
                "status": page.status_of(r),
                "total_usage": tree_usage_public(page.tree_usage.get(r.id)),
            }
        )
        for r in runs
    ]
    return RunList(runs=listed, next_cursor=next_cursor)


@router.get("/{run_id}", response_model=RunPublic, responses=documented(404))
async def get_run(run_id: StoredText, user: CurrentUser, service: ServiceDep) -> RunPublic:
    return await service.runs.live(await service.runs.get(run_id, user))
