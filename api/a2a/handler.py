"""The A2A request handler: every call answered from Temporal and Postgres, not memory.

The a2a-sdk's own handler keeps tasks in an in-process registry, which cannot see a
run executing in a worker; this one maps each A2A operation onto Keel's runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    AuthenticationInfo,
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
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
    UnsupportedOperationError,
)
from a2a.utils.errors import ExtendedAgentCardNotConfiguredError
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError

from keel.activities.store.push_config_store import PushConfigRecord
from keel.activities.store.records import RunRecord
from keel.api.a2a.errors import a2a_error, store_outages_refused
from keel.api.a2a.tasks import (
    INPUT_MODES,
    INTERRUPTED_STATES,
    STATE_RUNS,
    TERMINAL_STATES,
    report_artifact,
    task_of,
)
from keel.api.core.errors import Invalid, KeelError, NotFound
from keel.api.core.push_configs import PushConfigOrder
from keel.api.core.run_events import Wake
from keel.api.core.run_orders import RunOrder, new_run_id
from keel.api.core.schemas.interactions import InteractionDecisionCreate
from keel.api.core.service import KeelService
from keel.api.identity.auth import Principal

POLL_S = 0.5
BLOCKING_LIMIT_S = 600.0
APPROVE_WORDS = {"approve", "approved", "yes", "y", "ok", "allow"}
REJECT_WORDS = {"reject", "rejected", "no", "n", "deny"}


@store_outages_refused
class KeelA2AHandler(RequestHandler):
    """A2A operations on Keel runs; the task id is the run id, the context id the session."""

    def __init__(self, service_of: Callable[[], KeelService]) -> None:
        # The service is built in the app's lifespan, after the routes.
        self._service_of = service_of

    @property
    def _service(self) -> KeelService:
        return self._service_of()

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
        try:
            runs = await self._service.runs.page(
                user,
                limit=size,
                before=before,
                session_id=params.context_id or None,
                statuses=statuses,
                top_level=True,  # a sub-agent run is Keel's own step, not a client's task
            )
        except Invalid as exc:
            field = "contextId" if exc.field == "session_id" else "pageToken"
            raise _invalid_params(exc.message, field) from exc
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
        run, answered = await self._accept(params, context)
        if params.configuration.return_immediately:
            return await self._task(run)
        return await self._settled(run.id, _history_length(params), answered=answered)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        run, answered = await self._accept(params, context)
        async for event in self._follow(run.id, answered=answered):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        run = await self._run(params.id, context)
        task = await self._task(run)
        if task.status.state in TERMINAL_STATES:
            raise UnsupportedOperationError(
                message=f"Task {task.id} is already {run.status}; fetch it with GetTask."
            )
        # Unlike a send, a subscription outlasts `input-required`: it ends at a terminal state.
        async for event in self._follow(run.id, until=TERMINAL_STATES):
            yield event

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        run = await self._run(params.id, context)
        try:
            run = await self._service.runs.cancel(run.id, _principal(context))
        except KeelError as exc:
            raise a2a_error(exc, cancelling=True) from exc
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            run = await self._reload(run.id)
            if run.status in ("cancelled", "completed", "failed"):
                break
            await asyncio.sleep(0.1)
        return await self._task(run)

    # -- push notifications: Keel's signed webhook deliveries ----------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        run = await self._run(params.task_id, context)
        return await self._set_push_config(run.id, params, context)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        run = await self._run(params.task_id, context)
        try:
            found = await self._service.push_configs.get(run.id, params.id, _principal(context))
        except KeelError as exc:
            raise a2a_error(exc) from exc
        return _push_config(found)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        run = await self._run(params.task_id, context)
        configs = await self._service.push_configs.configs(run.id, _principal(context))
        return ListTaskPushNotificationConfigsResponse(configs=[_push_config(c) for c in configs])

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        run = await self._run(params.task_id, context)
        try:
            await self._service.push_configs.delete(run.id, params.id, _principal(context))
        except KeelError as exc:
            raise a2a_error(exc) from exc

    async def _set_push_config(
        self, task_id: str, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        return _push_config(await self._store_push_config(task_id, _push_order(params), context))

    async def _store_push_config(
        self, task_id: str, order: PushConfigOrder, context: ServerCallContext
    ) -> PushConfigRecord:
        try:
            return await self._service.push_configs.set(task_id, order, _principal(context))
        except Invalid as exc:
            raise _invalid_params(exc) from exc
        except KeelError as exc:
            raise a2a_error(exc) from exc

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()

    # -- internals --------------------------------------------------------

    async def _accept(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> tuple[RunRecord, str | None]:
        """A new task, or the answer to a task that waits for input (and which one)."""
        message = params.message
        if message.role != Role.ROLE_USER:
            raise InvalidParamsError(
                message='message.role: a client\'s message has the role ROLE_USER ("user" '
                f"before v1.0), not {Role.Name(message.role)}."
            )
        _check_media_types(message)
        text = _text_of(message)
        push = self._push_order(params)
        if message.task_id:
            run = await self._run(message.task_id, context)
            if push is not None:  # before the answer, so the updates it leads to find it
                await self._store_push_config(run.id, push, context)
            return run, await self._answer(run, text, message, context)
        if not text.strip():
            raise InvalidParamsError(message="The message has no text part to act on.")
        return await self._start(params, text, context, push), None

    def _push_order(self, params: SendMessageRequest) -> PushConfigOrder | None:
        """The push config sent with the message, checked; None without one."""
        if not params.configuration.HasField("task_push_notification_config"):
            return None
        return _push_order(params.configuration.task_push_notification_config)

    async def _start(
        self,
        params: SendMessageRequest,
        text: str,
        context: ServerCallContext,
        push: PushConfigOrder | None = None,
    ) -> RunRecord:
        """A new task; a push config sent with it is stored under its id first."""
        if push is None:
            return await self._start_run(params, text, context, None)
        run_id = new_run_id(None)  # chosen here, so the config can be stored before the run
        user = _principal(context)
        try:
            stored = await self._service.push_configs.set_for_new_task(run_id, push, user)
        except KeelError as exc:  # a URL this server does not send to
            raise a2a_error(exc) from None
        try:
            return await self._start_run(params, text, context, run_id)
        except BaseException:
            await self._service.push_configs.forget(run_id, stored.id)
            raise

    async def _start_run(
        self,
        params: SendMessageRequest,
        text: str,
        context: ServerCallContext,
        run_id: str | None,
    ) -> RunRecord:
        service = self._service
        # `/a2a` speaks for the configured default agent (KEEL_A2A_DEFAULT_AGENT).
        agent_name = context.state.get("agent") or service.default_agent
        meta = {**MessageToDict(params.metadata), **MessageToDict(params.message.metadata)}
        try:
            order = RunOrder.of(
                agent=agent_name,
                input=text,
                # Relative to the caller's root: the root itself, or its tenant's there.
                workspace=str(meta.get("workspace") or "."),
                trigger="a2a",
                run_id=run_id,
                session_id=params.message.context_id or f"ctx-{uuid.uuid4().hex[:16]}",
                on_busy="enqueue",
                metadata={"origin": "a2a"},
                session_metadata={"origin": "a2a"},
            )
            return (await service.runs.start(order, _principal(context))).record
        except Invalid as exc:
            raise _invalid_params(exc) from exc
        except KeelError as exc:
            raise a2a_error(exc) from exc

    async def _answer(
        self, run: RunRecord, text: str, message: Message, context: ServerCallContext
    ) -> str:
        """A message naming an input-required task decides what the task waits on; the
        interaction it decided."""
        user = _principal(context)
        decision_id = _decision_id(user, run.id, message.message_id)
        pending = await self._service.runs.pending(run)
        if not pending:
            taken = await self._decided_by(run, decision_id)
            if taken is not None:  # a retry of the message that decided it
                return taken
            raise UnsupportedOperationError(
                message=f"Task {message.task_id} is {run.status} and is not waiting for input."
            )
        data = _data_of(message)
        named = data.get("interaction_id")
        target = next((i for i in pending if i.id == named), pending[0])
        word = text.strip().lower().split()[0] if text.strip() else ""
        decision = str(data.get("decision") or "")
        if target.kind == "secret_ref" and decision != "reject":
            raise InvalidParamsError(
                message=f"Task {message.task_id} waits for a secret, which is never sent in a "
                "message: give it with `keel secret`, the console, or the REST API's `secret` "
                'field (or reply with a data part {"decision": "reject"}).'
            )
        if not decision:
            if target.kind == "ask_user":
                decision = "answer"
            elif word in APPROVE_WORDS:
                decision = "approve"
            elif word in REJECT_WORDS:
                decision = "reject"
            else:
                raise InvalidParamsError(
                    message=f"Task {message.task_id} waits for approval of {target.tool}: reply "
                    "'approve' or 'reject' (or a data part with decision and payload_hash)."
                )
        payload_hash = data.get("payload_hash") or (
            target.payload_hash if decision.startswith("approve") else None
        )
        try:
            body = InteractionDecisionCreate(
                decision=decision,  # type: ignore[arg-type]
                payload_hash=str(payload_hash) if payload_hash else None,
                text=text or None,
                arguments=data.get("arguments"),  # approve with edits: checked by the run
                grant=data.get("grant"),  # approve_always's scope: {kind, pattern, until}
            )
        except ValidationError as exc:
            raise InvalidParamsError(message=_first_problem(exc)) from exc
        try:
            await self._service.decisions.decide(
                run.id, target.id, body, user, decision_id=decision_id
            )
        except KeelError as exc:
            raise a2a_error(exc) from exc
        return target.id

    async def _decided_by(self, run: RunRecord, decision_id: str | None) -> str | None:
        """The interaction of the task's tree (its sub-agents' too) that this decision
        took, if it took one."""
        if decision_id is None:
            return None
        return await self._service.tasks.decided_by(run, decision_id)

    async def _settled(
        self, run_id: str, history_length: int | None, *, answered: str | None = None
    ) -> Task:
        """Wait until the task finishes or needs input (other than what `answered`
        decided: a decision queued for a worker still shows as pending), then answer."""
        deadline = time.monotonic() + BLOCKING_LIMIT_S
        async with self._subscription(run_id) as wake:
            while True:
                run = await self._reload(run_id)
                task, pending = await self._task_and_pending(run, history_length=history_length)
                if _settles(task, pending, TERMINAL_STATES | INTERRUPTED_STATES, answered):
                    return task
                if time.monotonic() > deadline:
                    return task  # still working: the client can poll GetTask
                await wake(POLL_S)

    async def _follow(
        self,
        run_id: str,
        until: set[TaskState] = TERMINAL_STATES | INTERRUPTED_STATES,
        *,
        answered: str | None = None,
    ) -> AsyncGenerator[Event]:
        """The Task first, then each change of state, the report, and the end (`until`,
        but not while the interaction `answered` still shows as pending)."""
        async with self._subscription(run_id) as wake:
            task, pending = await self._task_and_pending(await self._reload(run_id))
            yield task
            last = (task.status.state, task.status.message.message_id)
            while not _settles(task, pending, until, answered):
                await wake(POLL_S)
                run = await self._reload(run_id)
                task, pending = await self._task_and_pending(run)
                now = (task.status.state, task.status.message.message_id)
                if now == last:
                    continue
                last = now
                if task.status.state == TaskState.TASK_STATE_COMPLETED and run.report:
                    yield TaskArtifactUpdateEvent(
                        task_id=task.id,
                        context_id=task.context_id,
                        artifact=report_artifact(run),
                        last_chunk=True,
                    )
                yield TaskStatusUpdateEvent(
                    task_id=task.id, context_id=task.context_id, status=task.status
                )

    def _subscription(self, run_id: str) -> AbstractAsyncContextManager[Wake]:
        return self._service.events.wake(run_id)

    async def _task(self, run: RunRecord, *, history_length: int | None = None) -> Task:
        return (await self._task_and_pending(run, history_length=history_length))[0]

    async def _task_and_pending(
        self, run: RunRecord, *, history_length: int | None = None
    ) -> tuple[Task, set[str]]:
        pending = await self._service.runs.pending(run)
        # Every follow-up that answered the task, in order, for its history.
        asked = await self._service.tasks.interactions(run)
        decided = [i for i in asked if i.decision is not None]
        usage = await self._service.tasks.usage(run)
        task = task_of(run, pending, history_length=history_length, decided=decided, usage=usage)
        return task, {i.id for i in pending}

    async def _run(self, task_id: str, context: ServerCallContext) -> RunRecord:
        if not task_id:
            raise TaskNotFoundError(message="Task  was not found.")
        try:
            return await self._service.runs.get(task_id, _principal(context), allow_admin=False)
        except NotFound as exc:
            raise TaskNotFoundError(message=f"Task {task_id} was not found.") from exc
        except Invalid as exc:
            raise _invalid_params(exc.message, "id") from exc

    async def _reload(self, run_id: str) -> RunRecord:
        return await self._service.tasks.reload(run_id)


def _push_order(params: TaskPushNotificationConfig) -> PushConfigOrder:
    """A client's config as the service checks it, or -32602 saying what is wrong."""
    auth = params.authentication if params.HasField("authentication") else None
    try:
        return PushConfigOrder.of(
            config_id=params.id or None,
            url=params.url,
            token=params.token or None,
            auth_scheme=auth.scheme if auth else None,
            auth_credentials=auth.credentials if auth else None,
        )
    except Invalid as exc:
        raise _invalid_params(exc) from exc


def _push_config(record: PushConfigRecord) -> TaskPushNotificationConfig:
    """A stored config as A2A shows it: the token (the client's own check) is echoed."""
    config = TaskPushNotificationConfig(
        id=record.id, task_id=record.task_id, url=record.url, token=record.token or ""
    )
    if record.auth_scheme:
        # The scheme, not the credentials: a secret given once is not read back.
        config.authentication.CopyFrom(AuthenticationInfo(scheme=record.auth_scheme))
    return config


def _settles(task: Task, pending: set[str], until: set[TaskState], answered: str | None) -> bool:
    """Whether a send or stream ends here: at a state in `until`, unless that state is
    still the wait on the interaction the message just answered (a queued decision)."""
    if task.status.state not in until:
        return False
    return task.status.state in TERMINAL_STATES or answered not in pending


def _decision_id(user: Principal, task_id: str, message_id: str) -> str | None:
    """The decision a message makes, named by who sent which message to which task, so
    the same message sent again is the same decision (REST's retries name theirs alike);
    None for a message without an id."""
    if not message_id:
        return None
    sender = json.dumps([user.tenant_id, user.subject, task_id, message_id])
    return f"a2a-{hashlib.sha256(sender.encode()).hexdigest()[:40]}"


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


# The service's field names as A2A calls them.
A2A_FIELDS = {
    "session_id": "message.contextId",
    "input": "message.parts (the text)",
    "run_id": "id",
    "workspace": "metadata.workspace",
}


def _invalid_params(exc: Invalid | str, field: str | None = None) -> InvalidParamsError:
    """-32602 naming the A2A field at fault, with the service's sentence."""
    message = exc if isinstance(exc, str) else exc.message
    field = field or (None if isinstance(exc, str) else exc.field)
    if field is None:
        return InvalidParamsError(message=message)
    shown = A2A_FIELDS.get(field, field)
    message = message.removeprefix(f"{field}: ")
    return InvalidParamsError(message=f"{shown}: {message}")


def _first_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    return f"{field}: {first['msg']}"
