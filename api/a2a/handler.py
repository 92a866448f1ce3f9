"""The A2A request handler: every call answered from Temporal and Postgres, not memory.

The a2a-sdk's own handler keeps tasks in an in-process registry, which cannot see a
run executing in a worker; this one maps each A2A operation onto Keel's runs.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    ContentTypeNotSupportedError,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    PushNotificationNotSupportedError,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
    UnsupportedOperationError,
)
from a2a.utils.errors import ExtendedAgentCardNotConfiguredError
from google.protobuf.json_format import MessageToDict
from starlette.datastructures import State
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from activities.store.records import RunRecord
from api.a2a.tasks import (
    INPUT_MODES,
    INTERRUPTED_STATES,
    STATE_RUNS,
    TERMINAL_STATES,
    live_pending,
    report_artifact,
    task_of,
)
from api.core.run_factory import (
    resolve_workspace,
    run_input,
    session_workflow_id,
    submit_to_session,
)
from api.identity.auth import Principal
from api.identity.config import user_ref
from workflows.models import DecisionOutcome, InteractionDecision, Withdrawal, WithdrawOutcome
from workflows.session import SessionWorkflow

POLL_S = 0.5
BLOCKING_LIMIT_S = 600.0
APPROVE_WORDS = {"approve", "approved", "yes", "y", "ok", "allow"}
REJECT_WORDS = {"reject", "rejected", "no", "n", "deny"}


class KeelA2AHandler(RequestHandler):
    """A2A operations on Keel runs; the task id is the run id, the context id the session."""

    def __init__(self, state: State) -> None:
        self._state = state

    # -- reads ------------------------------------------------------------

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        run = await self._run(params.id, context)
        length = params.history_length if params.HasField("history_length") else None
        return await self._task(run, history_length=length)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        user = _principal(context)
        size = params.page_size if params.HasField("page_size") else 50
        if not 1 <= size <= 100:
            raise InvalidParamsError(message="page_size must be between 1 and 100.")
        before = None
        if params.page_token:
            try:
                stamp, last = params.page_token.split("|", 1)
                before = (datetime.fromisoformat(stamp), last)
            except ValueError as exc:
                raise InvalidParamsError(message="Malformed page_token.") from exc
        statuses = STATE_RUNS.get(params.status) if params.status else None
        runs = await self._state.store.list_runs(
            tenant_id=user.tenant_id,
            limit=size,
            before=before,
            session_id=params.context_id or None,
            statuses=statuses,
        )
        length = params.history_length if params.HasField("history_length") else None
        tasks = [await self._task(run, history_length=length) for run in runs]
        if not params.include_artifacts:
            for task in tasks:
                del task.artifacts[:]
        token = ""
        if len(runs) == size:
            token = f"{runs[-1].created_at.isoformat()}|{runs[-1].id}"
        return ListTasksResponse(
            tasks=tasks, next_page_token=token, page_size=size, total_size=len(tasks)
        )

    # -- messages ---------------------------------------------------------

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        run = await self._accept(params, context)
        if params.configuration.return_immediately:
            return await self._task(run)
        return await self._settled(run.id, _history_length(params))

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        run = await self._accept(params, context)
        async for event in self._follow(run.id):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        run = await self._run(params.id, context)
        task = await self._task(run)
        if task.status.state in TERMINAL_STATES:
            raise UnsupportedOperationError(
                message=f"Task {run.id} is already {run.status}; fetch it with GetTask."
            )
        # Unlike a send, a subscription outlasts `input-required`: it ends at a terminal state.
        async for event in self._follow(run.id, until=TERMINAL_STATES):
            yield event

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        run = await self._run(params.id, context)
        if run.status in ("completed", "failed", "cancelled"):
            raise TaskNotCancelableError(message=f"Task {run.id} is already {run.status}.")
        temporal = self._state.temporal
        withdrawn = False
        if run.status == "queued" and run.session_id:
            handle = temporal.get_workflow_handle(session_workflow_id(run.session_id))
            outcome: WithdrawOutcome = await handle.execute_update(
                SessionWorkflow.withdraw, Withdrawal(run_id=run.id)
            )
            withdrawn = outcome.was != "unknown"
        if not withdrawn:
            try:
                await temporal.get_workflow_handle(run.id).cancel()
            except RPCError as exc:
                raise TaskNotCancelableError(message=f"Task {run.id} has finished.") from exc
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            run = await self._reload(run.id)
            if run.status in ("cancelled", "completed", "failed"):
                break
            await asyncio.sleep(0.1)
        return await self._task(run)

    # -- push notifications are not offered (the card says so) -------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()

    # -- internals --------------------------------------------------------

    async def _accept(self, params: SendMessageRequest, context: ServerCallContext) -> RunRecord:
        """A new task, or the answer to a task that waits for input."""
        message = params.message
        _check_media_types(message)
        text = _text_of(message)
        if message.task_id:
            run = await self._run(message.task_id, context)
            await self._answer(run, text, message, context)
            return run
        if not text.strip():
            raise InvalidParamsError(message="The message has no text part to act on.")
        return await self._start(params, text, context)

    async def _start(
        self, params: SendMessageRequest, text: str, context: ServerCallContext
    ) -> RunRecord:
        state = self._state
        user = _principal(context)
        # `/a2a` speaks for the configured default agent (KEEL_A2A_DEFAULT_AGENT).
        agent_name = context.state.get("agent") or state.settings.a2a_default_agent
        agent = state.catalog.get(agent_name)
        if agent is None:
            raise InvalidParamsError(message=f"Unknown agent '{agent_name}'.")
        meta = {**MessageToDict(params.metadata), **MessageToDict(params.message.metadata)}
        raw_workspace = str(meta.get("workspace") or state.settings.workspace_root)
        try:
            workspace = resolve_workspace(raw_workspace, state.settings.workspace_root)
        except Exception as exc:  # an HTTPException naming the problem
            raise InvalidParamsError(message=f"metadata.workspace: {_detail(exc)}") from exc
        session_id = params.message.context_id or f"ctx-{uuid.uuid4().hex[:16]}"
        session = await state.sessions.create(
            session_id=session_id,
            tenant_id=user.tenant_id,
            agent=agent.name,
            workspace=str(workspace),
            model=None,
            approver=None,
            created_by=user_ref(user),
            metadata={"origin": "a2a"},
        )
        if session.tenant_id != user.tenant_id:
            raise InvalidParamsError(message="That contextId belongs to someone else.")
        run_id = f"run-{uuid.uuid4().hex[:16]}"
        run = run_input(
            run_id=run_id,
            agent=agent,
            text=text,
            model=agent.model or state.settings.model,
            workspace=workspace,
            user=user,
            trigger="a2a",
            settings=state.settings,
            session_id=session_id,
        )
        await submit_to_session(
            temporal=state.temporal,
            store=state.store,
            settings=state.settings,
            user=user,
            run=run,
            on_busy="enqueue",
            metadata={"origin": "a2a"},
        )
        return await self._reload(run_id)

    async def _answer(
        self, run: RunRecord, text: str, message: Message, context: ServerCallContext
    ) -> None:
        """A message naming an input-required task decides what the task waits on."""
        pending = await live_pending(self._state.temporal, self._state.interactions, run)
        if not pending:
            raise UnsupportedOperationError(
                message=f"Task {run.id} is {run.status} and is not waiting for input."
            )
        user = _principal(context)
        data = _data_of(message)
        target = next((i for i in pending if i.id == data.get("interaction_id")), pending[0])
        word = text.strip().lower().split()[0] if text.strip() else ""
        decision = str(data.get("decision") or "")
        if not decision:
            if target.kind == "ask_user":
                decision = "answer"
            elif word in APPROVE_WORDS:
                decision = "approve"
            elif word in REJECT_WORDS:
                decision = "reject"
            else:
                raise InvalidParamsError(
                    message=f"Task {run.id} waits for approval of {target.tool}: reply "
                    "'approve' or 'reject' (or a data part with decision and payload_hash)."
                )
        payload_hash = data.get("payload_hash") or (
            target.payload_hash if decision.startswith("approve") else None
        )
        request = InteractionDecision(
            interaction_id=target.id,
            decision=decision,  # type: ignore[arg-type]
            approver=user_ref(user),
            payload_hash=str(payload_hash) if payload_hash else None,
            text=text or None,
        )
        try:
            await self._state.temporal.get_workflow_handle(run.id).execute_update(
                "decide", request, result_type=DecisionOutcome
            )
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            kind = cause.type if isinstance(cause, ApplicationError) else ""
            if kind == "InteractionClosed":
                raise UnsupportedOperationError(message=str(cause)) from err
            raise InvalidParamsError(message=str(cause)) from err

    async def _settled(self, run_id: str, history_length: int | None) -> Task:
        """Wait until the task finishes or needs input, then answer with it."""
        deadline = time.monotonic() + BLOCKING_LIMIT_S
        async with self._subscription(run_id) as wake:
            while True:
                task = await self._task(await self._reload(run_id), history_length=history_length)
                if task.status.state in TERMINAL_STATES | INTERRUPTED_STATES:
                    return task
                if time.monotonic() > deadline:
                    return task  # still working: the client can poll GetTask
                await wake(POLL_S)

    async def _follow(
        self, run_id: str, until: set[TaskState] = TERMINAL_STATES | INTERRUPTED_STATES
    ) -> AsyncGenerator[Event]:
        """The Task first, then each change of state, the report, and the end (`until`)."""
        async with self._subscription(run_id) as wake:
            task = await self._task(await self._reload(run_id))
            yield task
            last = (task.status.state, task.status.message.message_id)
            while task.status.state not in until:
                await wake(POLL_S)
                run = await self._reload(run_id)
                task = await self._task(run)
                now = (task.status.state, task.status.message.message_id)
                if now == last:
                    continue
                last = now
                if task.status.state == TaskState.TASK_STATE_COMPLETED and run.report:
                    yield TaskArtifactUpdateEvent(
                        task_id=run.id,
                        context_id=task.context_id,
                        artifact=report_artifact(run),
                        last_chunk=True,
                    )
                yield TaskStatusUpdateEvent(
                    task_id=run.id, context_id=task.context_id, status=task.status
                )

    def _subscription(self, run_id: str) -> Any:
        hub = getattr(self._state, "event_hub", None)
        return _Wake(hub, run_id)

    async def _task(self, run: RunRecord, *, history_length: int | None = None) -> Task:
        pending = await live_pending(self._state.temporal, self._state.interactions, run)
        return task_of(run, pending, history_length=history_length)

    async def _run(self, task_id: str, context: ServerCallContext) -> RunRecord:
        user = _principal(context)
        run = await self._state.store.get_run(task_id) if task_id else None
        if run is None or run.tenant_id != user.tenant_id:
            if run is not None:
                await self._state.audit.cross_tenant(user, "a2a_task", task_id)
            raise TaskNotFoundError(message=f"Task {task_id} was not found.")
        return run

    async def _reload(self, run_id: str) -> RunRecord:
        run = await self._state.store.get_run(run_id)
        assert run is not None
        return run


class _Wake:
    """Wait for a run's next event notice, or at most a poll interval."""

    def __init__(self, hub: Any, run_id: str) -> None:
        self._hub = hub
        self._run_id = run_id
        self._context: Any = None
        self._subscription: Any = None

    async def __aenter__(self) -> Any:
        if self._hub is not None:
            self._context = self._hub.subscribe(self._run_id)
            self._subscription = await self._context.__aenter__()

        async def wake(wait_s: float) -> None:
            if self._subscription is None:
                await asyncio.sleep(wait_s)
            else:
                await self._subscription.next(wait_s)

        return wake

    async def __aexit__(self, *exc: object) -> None:
        if self._context is not None:
            await self._context.__aexit__(*exc)


def _principal(context: ServerCallContext) -> Principal:
    principal = context.state.get("principal")
    assert isinstance(principal, Principal), "the A2A route authenticates before dispatch"
    return principal


def _check_media_types(message: Message) -> None:
    """Keel's agents read text and JSON data (the card's input modes); say so for the rest."""
    for part in message.parts:
        kind = part.WhichOneof("content")
        media_type = part.media_type or ""
        if kind in (None, "text", "data") or (kind == "raw" and media_type.startswith("text/")):
            continue
        shown = media_type or "(no media type)"
        raise ContentTypeNotSupportedError(
            message=f"Keel agents read {' and '.join(INPUT_MODES)} parts, not a {kind} part "
            f"of {shown}; send its content as text."
        )


def _text_of(message: Message) -> str:
    texts = []
    for part in message.parts:
        if part.HasField("text"):
            texts.append(part.text)
        elif part.HasField("raw"):  # text/* only, see _check_media_types
            texts.append(part.raw.decode("utf-8", errors="replace"))
    return "\n".join(texts)


def _data_of(message: Message) -> dict[str, Any]:
    for part in message.parts:
        if part.HasField("data"):
            value = MessageToDict(part.data)
            if isinstance(value, dict):
                return value
    return {}


def _history_length(params: SendMessageRequest) -> int | None:
    config = params.configuration
    return config.history_length if config.HasField("history_length") else None


def _detail(exc: Exception) -> str:
    detail = getattr(exc, "detail", None)
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        return str(detail[0].get("msg"))
    return str(detail or exc)
