"""/v1/runs: start runs, read them and their events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from temporalio.service import RPCError

from activities.store.records import RunRecord
from api.core.page_cursor import decode_cursor, encode_cursor
from api.core.run_factory import session_workflow_id, start_run
from api.core.run_reads import live_run, run_for
from api.core.schemas import RunCreate, RunList, RunPublic, StoredText
from api.http.deps import (
    AuditDep,
    CatalogDep,
    CurrentUser,
    SessionStoreDep,
    SettingsDep,
    StoreDep,
    TemporalDep,
)
from api.http.errors import AUTHENTICATED, documented
from workflows.models import Withdrawal, WithdrawOutcome
from workflows.session import SessionWorkflow

router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=AUTHENTICATED)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=RunPublic,
    responses=documented(409),
)
async def create_run(
    body: RunCreate,
    user: CurrentUser,
    temporal: TemporalDep,
    store: StoreDep,
    sessions: SessionStoreDep,
    settings: SettingsDep,
    catalog: CatalogDep,
    audit: AuditDep,
) -> RunPublic:
    """Start a run; with `session_id`, the run joins that session (created if new)."""
    record = await start_run(
        body,
        user,
        temporal=temporal,
        store=store,
        sessions=sessions,
        settings=settings,
        catalog=catalog,
        audit=audit,
    )
    return RunPublic.from_record(record)


@router.post("/{run_id}/cancel", response_model=RunPublic, responses=documented(404, 409))
async def cancel_run(
    run_id: StoredText, user: CurrentUser, store: StoreDep, temporal: TemporalDep, audit: AuditDep
) -> RunPublic:
    """Cancel a run: a queued one leaves its session's queue, a live one is cancelled."""
    record = await run_for(run_id, user, store, audit, allow_admin=False)
    if record.status in ("completed", "failed", "cancelled"):
        raise HTTPException(409, detail=f"Run {run_id} has already {record.status}.")
    if record.status == "queued" and record.session_id is not None:
        session = temporal.get_workflow_handle_for(
            SessionWorkflow.run, session_workflow_id(record.session_id)
        )
        try:
            outcome: WithdrawOutcome = await session.execute_update(
                SessionWorkflow.withdraw, Withdrawal(run_id=run_id)
            )
        except RPCError:
            outcome = WithdrawOutcome(run_id=run_id, was="unknown")  # no session workflow
        if outcome.was != "unknown":
            return RunPublic.from_record(await _reloaded(store, run_id))
    try:
        await temporal.get_workflow_handle(run_id).cancel()
    except RPCError as err:
        raise HTTPException(409, detail=f"Run {run_id} can no longer be cancelled.") from err
    public = RunPublic.from_record(await _reloaded(store, run_id))
    public.status = "cancelling" if public.status not in ("cancelled",) else public.status
    return public


async def _reloaded(store: StoreDep, run_id: str) -> RunRecord:
    record = await store.get_run(run_id)
    assert record is not None
    return record


@router.get("", response_model=RunList)
async def list_runs(
    store: StoreDep,
    user: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    status_: Annotated[StoredText | None, Query(alias="status", max_length=32)] = None,
    agent: Annotated[StoredText | None, Query(max_length=64)] = None,
) -> RunList:
    before = decode_cursor(cursor) if cursor else None
    runs = await store.list_runs(
        tenant_id=user.tenant_id, limit=limit, before=before, status=status_, agent=agent
    )
    next_cursor = encode_cursor(runs[-1].created_at, runs[-1].id) if len(runs) == limit else None
    return RunList(runs=[RunPublic.from_record(r) for r in runs], next_cursor=next_cursor)


@router.get("/{run_id}", response_model=RunPublic, responses=documented(404))
async def get_run(
    run_id: StoredText, user: CurrentUser, store: StoreDep, temporal: TemporalDep, audit: AuditDep
) -> RunPublic:
    return await live_run(await run_for(run_id, user, store, audit), temporal)
