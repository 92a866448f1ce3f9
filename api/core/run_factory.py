"""Turning an API request into a run: checks, the run's input, and how it starts."""

from __future__ import annotations

import uuid
from pathlib import Path

from fastapi import HTTPException
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

from activities.store.records import RunRecord
from activities.store.run_store import Store
from activities.store.session_store import SessionStore
from api.core.audit_trail import ApiAudit
from api.core.schemas import RunCreate
from api.http.errors import problem
from api.identity.auth import Principal
from api.identity.config import user_ref
from worker.agent_catalog import AgentCatalog
from worker.settings import Settings
from workflows import timeouts
from workflows.agent_run import AgentRunWorkflow
from workflows.models import (
    AgentSpec,
    RunInput,
    SessionState,
    SessionSubmission,
    SubmitOutcome,
)
from workflows.session import SessionWorkflow


def resolve_workspace(raw: str, root: Path) -> Path:
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = root / path
    path = path.resolve()
    if not path.is_relative_to(root.resolve()):
        raise problem(
            422,
            "workspace",
            f"Workspace {path} is outside the allowed root {root.resolve()}; "
            "choose a directory inside it or start Keel with KEEL_WORKSPACE_ROOT set.",
        )
    if not path.is_dir():
        raise problem(422, "workspace", f"Workspace {path} is not an existing directory.")
    return path


def find_agent(catalog: AgentCatalog, name: str) -> AgentSpec:
    agent = catalog.get(name)
    if agent is None:
        raise problem(
            422, "agent", f"Unknown agent '{name}'. Known agents: {', '.join(catalog.names())}."
        )
    return agent


def new_run_id(given: str | None) -> str:
    return given or f"run-{uuid.uuid4().hex[:16]}"


def session_workflow_id(session_id: str) -> str:
    return f"session-{session_id}"


async def start_run(
    body: RunCreate,
    user: Principal,
    *,
    temporal: Client,
    store: Store,
    sessions: SessionStore,
    settings: Settings,
    catalog: AgentCatalog,
    audit: ApiAudit,
) -> RunRecord:
    """Start the run a request asks for; with `session_id`, it joins that session (created
    if new). A retried request with the same `run_id` answers with the run it started."""
    agent = find_agent(catalog, body.agent)
    workspace = resolve_workspace(body.workspace, settings.workspace_root)
    run_id = new_run_id(body.run_id)
    existing = await store.get_run(run_id)
    if existing is not None:
        if existing.tenant_id != user.tenant_id:
            await audit.cross_tenant(user, "run", run_id)
            raise problem(409, "run_id", "That run id is taken; choose another.")
        return existing
    run = run_input(
        run_id=run_id,
        agent=agent,
        text=body.input,
        model=body.model or agent.model or settings.model,
        workspace=workspace,
        user=user,
        trigger=body.trigger,
        settings=settings,
        session_id=body.session_id,
        approver=body.approver,
        approval_expires_after_s=body.approval_expires_after_s,
        webhook_url=body.webhook_url,
    )
    if body.session_id is None:
        await record_and_start(
            temporal=temporal,
            store=store,
            settings=settings,
            user=user,
            run=run,
            metadata=body.metadata,
        )
    else:
        session = await sessions.create(
            session_id=body.session_id,
            tenant_id=user.tenant_id,
            agent=agent.name,
            workspace=str(workspace),
            model=body.model,
            approver=body.approver,
            created_by=user_ref(user),
            metadata={},
        )
        if session.tenant_id != user.tenant_id:
            await audit.cross_tenant(user, "session", body.session_id)
            raise problem(409, "session_id", "That session id is taken; choose another.")
        await submit_to_session(
            temporal=temporal,
            store=store,
            settings=settings,
            user=user,
            run=run,
            on_busy=body.on_busy,
            metadata=body.metadata,
        )
    record = await store.get_run(run_id)
    assert record is not None
    return record


async def record_and_start(
    *,
    temporal: Client,
    store: Store,
    settings: Settings,
    user: Principal,
    run: RunInput,
    metadata: dict[str, str],
) -> None:
    """Record the run as queued, then start its workflow; a retried request starts nothing."""
    await store.create_run(
        run_id=run.run_id,
        tenant_id=user.tenant_id,
        agent=run.agent.name,
        model=run.model,
        requester=run.requester,
        trigger=run.trigger,
        workspace=run.workspace,
        input=run.input,
        session_id=run.session_id,
        metadata=metadata,
    )
    try:
        await temporal.start_workflow(
            AgentRunWorkflow.run,
            await as_started(store, run),
            id=run.run_id,
            task_queue=settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        pass


async def submit_to_session(
    *,
    temporal: Client,
    store: Store,
    settings: Settings,
    user: Principal,
    run: RunInput,
    on_busy: str,
    metadata: dict[str, str],
) -> SubmitOutcome:
    """Hand the run to its session's workflow, which runs one at a time."""
    assert run.session_id is not None
    if on_busy == "reject":
        # Postgres says when a run has finished, a moment before its session workflow knows.
        busy = await store.session_busy(run.session_id)
        if busy is not None:
            raise HTTPException(
                409,
                detail=f"Session {run.session_id} is busy with run {busy}; send "
                "on_busy=enqueue or interrupt, or wait for it to finish.",
            )
        on_busy = "enqueue"
    handle = await temporal.start_workflow(
        SessionWorkflow.run,
        SessionState(session_id=run.session_id, tenant_id=user.tenant_id),
        id=session_workflow_id(run.session_id),
        task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    try:
        outcome: SubmitOutcome = await handle.execute_update(
            "submit",
            SessionSubmission(
                run=await as_started(store, run),
                on_busy=on_busy,  # type: ignore[arg-type]
            ),
            result_type=SubmitOutcome,
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type == "SessionBusy":
            raise HTTPException(409, detail=str(cause)) from err
        if isinstance(cause, ApplicationError) and cause.type == "DuplicateRun":
            raise problem(409, "run_id", str(cause)) from err
        raise
    await store.create_run(
        run_id=run.run_id,
        tenant_id=user.tenant_id,
        agent=run.agent.name,
        model=run.model,
        requester=run.requester,
        trigger=run.trigger,
        workspace=run.workspace,
        input=run.input,
        session_id=run.session_id,
        metadata=metadata,
    )
    return outcome


async def as_started(store: Store, run: RunInput) -> RunInput:
    """The run as its workflow gets it.

    The system prompt and input are stored in Postgres under a key the input carries,
    so the history holds neither, whatever their size; and the run is told whether
    its model's latest calls were fast, which lets its first call run in the worker.
    """
    key = await store.put_run_texts(run.tenant_id, run.agent.system_prompt, run.input)
    fast = await store.model_is_fast(run.model, timeouts.LLM_LOCAL_BELOW_MS)
    # The workflow never reads the agent's description either.
    agent = run.agent.model_copy(update={"system_prompt": "", "description": ""})
    update = {"agent": agent, "input": "", "texts_key": key, "fast_model": fast}
    return run.model_copy(update=update)


def run_input(
    *,
    run_id: str,
    agent: AgentSpec,
    text: str,
    model: str,
    workspace: Path,
    user: Principal,
    trigger: str,
    settings: Settings,
    session_id: str | None = None,
    approver: str | None = None,
    approval_expires_after_s: int | None = None,
    webhook_url: str | None = None,
    schedule_id: str | None = None,
) -> RunInput:
    return RunInput.model_validate(
        {
            "run_id": run_id,
            "agent": agent,
            "input": text,
            "model": model,
            "workspace": str(workspace),
            "tenant_id": user.tenant_id,
            "requester": user_ref(user),
            "trigger": trigger,
            "session_id": session_id,
            "llm_max_attempts": settings.llm_max_attempts,
            "approver": approver,
            "approval_expires_after_s": approval_expires_after_s,
            "webhook_url": webhook_url,
            "schedule_id": schedule_id,
        }
    )
