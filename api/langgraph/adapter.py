"""The LangGraph-compatible surface over `KeelService`: no second implementation of runs.

Agents are assistants, sessions are threads, runs are runs, schedules are crons and
pending interactions are interrupts. Every operation goes through the service (so
tenancy, idempotency, checks and audits are the REST API's); this class only maps
LangGraph's requests onto it and Keel's records back.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from keel.activities.store.records import RunRecord
from keel.activities.store.session_store import SessionRecord
from keel.api.core.errors import Conflict, Invalid, NotFound, invalid_request
from keel.api.core.fork_seed import step_count
from keel.api.core.run_orders import OnBusy, RunOrder
from keel.api.core.schedules.schemas import ScheduleCreate
from keel.api.core.schemas.forks import ForkCreate
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.core.schemas.sessions import SessionMessage
from keel.api.core.service import KeelService
from keel.api.core.tenant_ids import in_view
from keel.api.core.threads import ThreadRun, metadata_text
from keel.api.events.hub import DeltaNotice
from keel.api.events.stream import Outgoing
from keel.api.identity.auth import Principal
from keel.api.langgraph import checkpoints, wire
from keel.api.langgraph.stream import RunStreamTranslator, StreamPart

__all__ = ["LangGraphAdapter", "StartedLangGraphRun"]

ON_BUSY: dict[str, OnBusy] = {"reject": "reject", "enqueue": "enqueue", "interrupt": "interrupt"}
LOADED_AT = datetime.now(UTC)
"""When this API loaded the agent definitions: assistants' `created_at`."""


StartedLangGraphRun = ThreadRun
"""The Keel run a LangGraph request created or resumed (the core's thread run)."""


class LangGraphAdapter:
    """LangGraph's assistants, threads, runs and crons, each mapped onto the service."""

    def __init__(self, service: KeelService) -> None:
        self._service = service

    # -- assistants --------------------------------------------------------------

    def assistants(self, body: wire.AssistantSearch, user: Principal) -> list[dict[str, Any]]:
        """The agents the caller's roles may use, as assistants."""
        found = [
            wire.assistant(agent, LOADED_AT)
            for agent in self._service.access.usable(user)
            if body.graph_id in (None, agent.name)
            and (body.name is None or body.name.lower() in agent.name.lower())
        ]
        return found[body.offset : body.offset + body.limit]

    def assistant(self, assistant_id: str, user: Principal) -> dict[str, Any]:
        agent = self._service.access.lookup(assistant_id, user)
        if agent is None:  # one the caller's roles exclude is not offered either
            raise NotFound(f"No assistant {assistant_id}; search assistants for those there are.")
        return wire.assistant(agent, LOADED_AT)

    # -- threads -----------------------------------------------------------------

    async def create_thread(self, body: wire.ThreadCreate, user: Principal) -> dict[str, Any]:
        thread_id = body.thread_id or str(uuid.uuid4())
        if body.thread_id is not None:
            try:
                existing = await self._service.sessions.get(thread_id, user)
            except NotFound:
                existing = None
            if existing is not None:
                if body.if_exists == "raise":
                    raise Conflict(f"Thread {thread_id} already exists.", field="thread_id")
                return await self.thread(thread_id, user)
        metadata = dict(body.metadata or {})
        await self.new_thread_session(thread_id, metadata, user)
        return await self.thread(thread_id, user)

    async def thread_session(
        self, thread_id: str, metadata: dict[str, Any], user: Principal
    ) -> SessionRecord:
        """The thread's session, created (with `metadata`'s agent and workspace) if new."""
        return await self._service.threads.session(thread_id, metadata, user)

    async def new_thread_session(
        self, thread_id: str, metadata: dict[str, Any], user: Principal
    ) -> SessionRecord:
        return await self._service.threads.new_session(thread_id, metadata, user)

    async def thread(self, thread_id: str, user: Principal) -> dict[str, Any]:
        session, turns, active, queued = await self._service.sessions.history(thread_id, user)
        latest = await self._latest_run(thread_id, user)
        interrupts = await self._waiting(latest)
        status = "idle"
        if interrupts:
            status = "interrupted"
        elif active or queued or (latest is not None and latest.status in ("queued", "running")):
            status = "busy"
        elif latest is not None and latest.status == "failed":
            status = "error"
        return wire.thread(
            session,
            status=status,
            values={"messages": wire.history_messages(turns)},
            interrupts=interrupts,
            updated_at=latest.finished_at or latest.created_at if latest else None,
        )

    async def search_threads(
        self, body: wire.ThreadSearch, user: Principal
    ) -> list[dict[str, Any]]:
        sessions = await self._service.sessions.page(
            user, limit=min(body.offset + body.limit, 1000), before=None
        )
        wanted = {str(k): metadata_text(v) for k, v in (body.metadata or {}).items()}
        found = []
        for session in sessions:
            shown = wire.shown_thread(session)
            if body.ids is not None and shown not in body.ids:
                continue
            if any(session.metadata.get(k) != v for k, v in wanted.items()):
                continue
            view = await self.thread(shown, user)
            if body.status is None or view["status"] == body.status:
                found.append(view)
        return found[body.offset : body.offset + body.limit]

    async def state(self, thread_id: str, user: Principal) -> dict[str, Any]:
        session, turns, _, _ = await self._service.sessions.history(thread_id, user)
        runs = await self._service.runs.page(user, limit=2, session_id=thread_id)
        interrupts = await self._waiting(runs[0] if runs else None)
        return wire.thread_state(
            wire.shown_thread(session),
            values={"messages": wire.history_messages(turns)},
            checkpoint_id=wire.shown_run(runs[0]) if runs else None,
            parent_id=wire.shown_run(runs[1]) if len(runs) > 1 else None,
            interrupts=interrupts,
            created_at=runs[0].created_at if runs else session.created_at,
        )

    async def history(self, thread_id: str, user: Principal, limit: int) -> list[dict[str, Any]]:
        """One state per step of each run of the thread, newest first: what the thread
        held after that step (`checkpoints`); a fork's first step has the checkpoint it
        was forked at as its parent."""
        session, turns, _, _ = await self._service.sessions.history(thread_id, user)
        records = await self._service.runs.page(user, limit=1000, session_id=thread_id)
        states: list[dict[str, Any]] = []
        parent: str | None = None
        for record in reversed(records):  # oldest first
            run = wire.shown_run(record)
            # A fork's own messages begin with the thread's turns it was forked after.
            earlier = [] if record.forked_from else wire.history_messages(_before(turns, record))
            if record.forked_from is not None:
                parent = checkpoints.checkpoint_id(
                    in_view(record.tenant_id, record.forked_from), record.forked_at_step or 0
                )
            messages = await self._service.forks.steps(record)
            for step, values in checkpoints.step_values(messages, run):
                cid = checkpoints.checkpoint_id(run, step)
                states.append(
                    wire.thread_state(
                        wire.shown_thread(session),
                        values={"messages": earlier + values},
                        checkpoint_id=cid,
                        parent_id=parent,
                        interrupts=[],
                        created_at=record.created_at,
                    )
                )
                parent = cid
        return list(reversed(states))[:limit]

    # -- runs --------------------------------------------------------------------

    async def start(
        self, thread_id: str | None, body: wire.LangGraphRunCreate, user: Principal
    ) -> StartedLangGraphRun:
        """Create the run a request asks for, or resume the thread's waiting run."""
        stream_modes(body.stream_mode)  # refuse an unsupported mode before starting anything
        session = await self._thread_for_run(thread_id, body, user) if thread_id else None
        if body.command is not None and body.command.resume is not None:
            if session is None:
                raise Invalid(
                    "command.resume answers a thread's interrupt; send it on that thread.",
                    field="command",
                )
            return await self.resume(session, body.command.resume, user)
        if body.command is not None and (body.command.goto or body.command.update):
            raise Invalid(
                "Keel honours only command.resume; goto and update need LangGraph's graph.",
                field="command",
            )
        checkpoint = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
        if checkpoint:
            return await self._fork_at(session, str(checkpoint), body, user)
        if body.multitask_strategy == "rollback":
            raise Invalid(
                "multitask_strategy 'rollback' is not supported: Keel keeps every run. Use "
                "'interrupt' to cancel the active run, 'enqueue' or 'reject'.",
                field="multitask_strategy",
            )
        metadata = {str(k): metadata_text(v) for k, v in (body.metadata or {}).items()}
        metadata[wire.MULTITASK_KEY] = body.multitask_strategy
        order = RunOrder.of(
            agent=body.assistant_id,
            input=input_text(body.input),
            workspace=_workspace(body) or (session.workspace if session else "."),
            trigger="api",
            session_id=thread_id if session else None,  # the service finds the caller's
            on_busy=ON_BUSY[body.multitask_strategy],
            model=session.model if session else None,
            approver=session.approver if session else None,
            metadata=metadata,
            webhook_url=body.webhook,
        )
        started = await self._service.runs.start(order, user)
        return StartedLangGraphRun(record=started.record, thread_id=thread_id)

    async def _fork_at(
        self,
        session: SessionRecord | None,
        checkpoint: str,
        body: wire.LangGraphRunCreate,
        user: Principal,
    ) -> StartedLangGraphRun:
        """A run from a checkpoint of the thread: the fork of its run at its step, in the
        thread, with the request's message (if any) after it."""
        if session is None:
            raise Invalid(
                "A checkpoint names a step of a thread's run; create the run on that thread.",
                field="checkpoint_id",
            )
        thread_id = wire.shown_thread(session)
        run_id, step = checkpoints.parse_checkpoint(checkpoint)
        record = await self._run_of_thread(thread_id, run_id, user)
        if step is None:
            step = step_count(await self._service.forks.steps(record))
        try:
            fork = ForkCreate(step=step, message=input_text(body.input) if body.input else None)
        except ValidationError as exc:
            raise invalid_request(exc) from exc
        started = await self._service.forks.fork(
            run_id,
            fork,
            user,
            session_id=thread_id,
            on_busy=ON_BUSY.get(body.multitask_strategy, "reject"),
        )
        return StartedLangGraphRun(record=started.record, thread_id=thread_id)

    async def _thread_for_run(
        self, thread_id: str, body: wire.LangGraphRunCreate, user: Principal
    ) -> SessionRecord:
        if body.if_not_exists == "create":
            return await self.thread_session(thread_id, {"graph_id": body.assistant_id}, user)
        try:
            return await self._service.sessions.get(thread_id, user)
        except NotFound:
            raise NotFound(
                f"No thread {thread_id}; create it first, or send if_not_exists='create'."
            ) from None

    async def resume(
        self, session: SessionRecord, value: Any, user: Principal
    ) -> StartedLangGraphRun:
        """Decide what the thread's run waits on; the same durable run goes on."""
        return await self._service.threads.resume(session, value, user)

    async def run(self, thread_id: str, run_id: str, user: Principal) -> dict[str, Any]:
        record = await self._run_of_thread(thread_id, run_id, user)
        return wire.run(record, waiting=bool(await self._waiting(record)))

    async def runs(self, thread_id: str, user: Principal, limit: int) -> list[dict[str, Any]]:
        await self._service.sessions.get(thread_id, user)
        records = await self._service.runs.page(user, limit=limit, session_id=thread_id)
        return [wire.run(r, waiting=bool(await self._waiting(r))) for r in records]

    async def run_view(self, started: StartedLangGraphRun, user: Principal) -> dict[str, Any]:
        record = await self._service.runs.get(started.run_id, user)
        waiting = bool(await self._waiting(record))
        return wire.run(record, waiting=waiting, thread_id=started.thread_id)

    async def cancel(self, thread_id: str, run_id: str, action: str, user: Principal) -> None:
        if action != "interrupt":
            raise Invalid(
                "Cancel with action 'interrupt'; 'rollback' is not supported (Keel keeps runs).",
                field="action",
                where="query",
            )
        await self._run_of_thread(thread_id, run_id, user)
        await self._service.runs.cancel(run_id, user)

    async def joined(self, thread_id: str, run_id: str, user: Principal) -> StartedLangGraphRun:
        record = await self._run_of_thread(thread_id, run_id, user)
        return StartedLangGraphRun(record=record, thread_id=thread_id)

    async def _run_of_thread(self, thread_id: str, run_id: str, user: Principal) -> RunRecord:
        session = await self._service.sessions.get(thread_id, user)
        record = await self._service.runs.get(run_id, user, allow_admin=False)
        if record.session_id != session.id:
            raise NotFound(f"No run {run_id} on thread {thread_id}.")
        return record

    # -- streaming ---------------------------------------------------------------

    async def translator(
        self,
        started: StartedLangGraphRun,
        modes: list[str],
        user: Principal,
        *,
        after_seq: int = 0,
    ) -> RunStreamTranslator:
        """A translator for the run, seeded with the thread's earlier messages."""
        record = started.record
        earlier: list[dict[str, Any]] = []
        if record.session_id is not None:
            thread_id = in_view(record.tenant_id, record.session_id)
            _, turns, _, _ = await self._service.sessions.history(thread_id, user)
            earlier = wire.history_messages(_before(turns, record))

        async def pending(run_id: str) -> list[InteractionPublic]:
            return await self.waiting_of(run_id, user)

        return RunStreamTranslator(
            started.run_id,
            modes=modes,
            earlier=earlier,
            pending=pending,
            after_seq=after_seq,
            after_interactions=started.resumed,
        )

    def events(self, record: RunRecord) -> AsyncIterator[Outgoing | DeltaNotice | str]:
        """The run's events from the start, live, as the REST event stream has them."""
        return self._service.events.stream(record).items()

    async def sse(
        self, started: StartedLangGraphRun, translator: RunStreamTranslator
    ) -> AsyncIterator[str]:
        """The SSE body: `metadata` first, then the parts, ending at the end or an interrupt."""
        yield StreamPart("metadata", {"run_id": started.run_id, "attempt": 1}).sse()
        async for part in translator.parts(self.events(started.record)):
            yield part if isinstance(part, str) else part.sse()

    async def wait(self, started: StartedLangGraphRun, user: Principal) -> dict[str, Any]:
        """The thread's values once the run has ended or waits on a person."""
        translator = await self.translator(started, [], user)
        async for _ in translator.parts(self.events(started.record)):
            pass
        return translator.final_values()

    # -- crons -------------------------------------------------------------------

    async def create_cron(self, body: wire.CronCreate, user: Principal) -> dict[str, Any]:
        try:
            config = ScheduleCreate(
                agent=body.assistant_id,
                input=input_text(body.input),
                workspace=str((body.config or {}).get("configurable", {}).get("workspace") or "."),
                cron_expressions=[body.schedule],
                time_zone=body.timezone or "UTC",
                paused=not body.enabled,
                webhook_url=body.webhook,
            )
        except ValidationError as exc:
            raise invalid_request(exc) from exc
        return wire.cron(await self._service.schedules.create(config, user))

    async def search_crons(self, body: wire.CronSearch, user: Principal) -> list[dict[str, Any]]:
        if body.thread_id is not None:
            return []  # Keel's crons start stateless runs: none belongs to a thread
        listed = await self._service.schedules.page(user, limit=1000, after=None)
        found = [
            wire.cron(s)
            for s in listed.schedules
            if body.assistant_id in (None, s.agent) and s.cron_expressions
        ]
        return found[body.offset : body.offset + body.limit]

    async def delete_cron(self, cron_id: str, user: Principal) -> None:
        await self._service.schedules.delete(cron_id, user)

    # -- reads shared by the above -------------------------------------------------

    async def _latest_run(self, thread_id: str, user: Principal) -> RunRecord | None:
        runs = await self._service.runs.page(user, limit=1, session_id=thread_id)
        return runs[0] if runs else None

    async def _waiting(self, record: RunRecord | None) -> list[InteractionPublic]:
        return await self._service.threads.waiting(record)

    async def waiting_of(self, run_id: str, user: Principal) -> list[InteractionPublic]:
        """What the run waits on now; nothing once it has ended."""
        return await self._service.threads.waiting_of(run_id, user)


def stream_modes(raw: str | list[str]) -> list[str]:
    """The modes asked for, each one Keel can honour; `Invalid` naming the first it cannot."""
    modes = [raw] if isinstance(raw, str) else list(raw)
    for mode in modes:
        if mode not in wire.SUPPORTED_STREAM_MODES:
            raise Invalid(
                f"stream_mode '{mode}' is not supported by Keel; use "
                f"{', '.join(wire.SUPPORTED_STREAM_MODES)}.",
                field="stream_mode",
            )
    return modes or ["values"]


def input_text(payload: dict[str, Any] | None) -> str:
    """The task of a run: the text of the last message of `input.messages`, a user's."""
    messages = (payload or {}).get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if isinstance(last, str):
        return last
    if isinstance(last, dict) and (last.get("role") or last.get("type")) in ("user", "human"):
        content = last.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "\n".join(
                str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
            )
        if isinstance(content, str) and content.strip():
            return content
    raise Invalid(
        "input.messages must end with a user message with text, e.g. "
        '{"messages": [{"role": "user", "content": "Review this code."}]}.',
        field="input.messages",
    )


def _workspace(body: wire.LangGraphRunCreate) -> str | None:
    configurable = (body.config or {}).get("configurable") or {}
    found = (body.context or {}).get("workspace") or configurable.get("workspace")
    return str(found) if found else None


def _before(turns: list[SessionMessage], record: RunRecord) -> list[SessionMessage]:
    """The thread's turns from the runs before this one."""
    shown = wire.shown_run(record)  # as turns name runs
    return [t for t in turns if t.run_id != shown and t.created_at <= record.created_at]
