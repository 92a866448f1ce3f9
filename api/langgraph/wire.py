"""The LangGraph Agent Server API's wire format, as the `langgraph-sdk` clients read it.

Requests are checked with pydantic like the rest of the API (unknown fields are
ignored, as the LangGraph server ignores them); answers are built from Keel's records
by the functions here, so the mapping (agent → assistant, session → thread, run → run,
schedule → cron, pending interaction → interrupt) lives in one place.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from keel.activities.store.records import RunRecord
from keel.activities.store.session_store import SessionRecord
from keel.api.core.schedules.fields import WebhookUrl
from keel.api.core.schedules.schemas import SchedulePublic
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.core.schemas.sessions import SessionMessage
from keel.api.core.tenant_ids import in_view
from keel.workflows.run.agent_spec import AgentSpec

__all__ = [
    "MULTITASK_KEY",
    "AssistantSearch",
    "CronCreate",
    "CronSearch",
    "LangGraphRunCreate",
    "ThreadCreate",
    "ThreadHistoryRequest",
    "ThreadSearch",
    "assistant",
    "cron",
    "interrupt",
    "run",
    "run_status",
]

StreamMode = Literal["values", "messages", "messages-tuple", "updates", "events", "custom"]
"""The stream modes Keel honours; the others (`debug`, `tasks`, `checkpoints`, `tools`,
`lifecycle`) need LangGraph's graph internals and are refused."""
SUPPORTED_STREAM_MODES: tuple[str, ...] = StreamMode.__args__  # type: ignore[attr-defined]
MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
MULTITASK_KEY = "langgraph.multitask_strategy"
"""Run metadata key that remembers the strategy a run was created with."""
GRAPH_NODE = "agent"
"""The node name updates and message metadata carry: a Keel run is one agent loop."""
TOOLS_NODE = "tools"


class _Lenient(BaseModel):
    """LangGraph clients send many optional fields; those Keel has no use for are ignored."""

    model_config = ConfigDict(extra="ignore")


class AssistantSearch(_Lenient):
    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class ThreadCreate(_Lenient):
    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"


class ThreadSearch(_Lenient):
    metadata: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class ThreadHistoryRequest(_Lenient):
    """`POST /threads/{id}/history`: Keel's checkpoints are its runs' steps; only `limit`
    applies."""

    limit: int = Field(default=10, ge=1, le=1000)


class Command(_Lenient):
    """`command`: Keel honours `resume`, the answer to what the run waits on."""

    resume: Any = None
    update: Any = None
    goto: Any = None


class LangGraphRunCreate(_Lenient):
    """A run to create (in the background, streamed, or waited for)."""

    assistant_id: str = Field(min_length=1, max_length=64)
    input: dict[str, Any] | None = None
    command: Command | None = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    stream_mode: str | list[str] = "values"
    stream_subgraphs: bool = False
    multitask_strategy: MultitaskStrategy = "reject"
    if_not_exists: Literal["reject", "create"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    interrupt_before: Any = None
    interrupt_after: Any = None
    webhook: WebhookUrl | None = None
    """Receives Keel's signed POST when the run waits for approval and when it ends."""
    checkpoint_id: str | None = Field(default=None, max_length=300)
    """Fork the thread's run at this checkpoint (`RUN_ID@STEP`, as the history lists)."""
    checkpoint: dict[str, Any] | None = None
    """The same, as LangGraph's checkpoint object (its `checkpoint_id`)."""


class CronCreate(_Lenient):
    assistant_id: str = Field(min_length=1, max_length=64)
    schedule: str = Field(min_length=1, max_length=200)
    input: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    timezone: str | None = None
    enabled: bool = True
    webhook: WebhookUrl | None = None
    multitask_strategy: MultitaskStrategy | None = None


class CronSearch(_Lenient):
    assistant_id: str | None = None
    thread_id: str | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


# -- answers ---------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def assistant(agent: AgentSpec, created_at: datetime) -> dict[str, Any]:
    """An agent definition as a LangGraph assistant: id, graph and name are its name."""
    return {
        "assistant_id": agent.name,
        "graph_id": agent.name,
        "name": agent.name,
        "description": agent.description,
        "config": {"configurable": {}},
        "context": {},
        "metadata": {"tools": list(agent.tools), "model": agent.model},
        "version": 1,
        "created_at": _iso(created_at),
        "updated_at": _iso(created_at),
    }


RUN_STATUS = {
    "queued": "pending",
    "running": "running",
    "completed": "success",
    "failed": "error",
    "cancelled": "interrupted",
}
"""Keel's run status → LangGraph's; a running run that waits on a person is `interrupted`."""


def run_status(record: RunRecord, waiting: bool) -> str:
    if record.status == "running" and waiting:
        return "interrupted"
    if record.status == "failed" and record.stop_reason == "approval_expired":
        return "timeout"
    return RUN_STATUS.get(record.status, "error")


def shown_run(record: RunRecord) -> str:
    """The run's id as its tenant knows it: without the scope (`api.core.tenant_ids`)."""
    return in_view(record.tenant_id, record.id)


def shown_thread(session: SessionRecord) -> str:
    """The thread's id as its tenant knows it: without the scope (`api.core.tenant_ids`)."""
    return in_view(session.tenant_id, session.id)


def run(record: RunRecord, *, waiting: bool, thread_id: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = dict(record.metadata)
    strategy = metadata.pop(MULTITASK_KEY, "reject")
    session_id = record.session_id and in_view(record.tenant_id, record.session_id)
    return {
        "run_id": shown_run(record),
        "thread_id": thread_id or session_id,
        "assistant_id": record.agent,
        "created_at": _iso(record.created_at),
        "updated_at": _iso(record.finished_at or record.started_at or record.created_at),
        "status": run_status(record, waiting),
        "metadata": metadata,
        "multitask_strategy": strategy,
        "kwargs": {},
    }


def interrupt(ia: InteractionPublic) -> dict[str, Any]:
    """A pending interaction as a LangGraph interrupt: its id, and what to show and send back."""
    value: dict[str, Any] = {
        "kind": ia.kind,
        "run_id": ia.run_id,
        "tool": ia.tool,
        "subject": ia.subject,
        "arguments": ia.arguments,
        "payload_hash": ia.payload_hash,
        "risk": ia.risk,
        "expires_at": ia.expires_at.isoformat(),
        "approvers": ia.approvers,
    }
    if ia.question:
        value["question"] = ia.question
    return {"value": value, "id": ia.id}


def human_message(content: str, message_id: str) -> dict[str, Any]:
    return {
        "type": "human",
        "content": content,
        "id": message_id,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
        "example": False,
    }


def ai_message(
    content: str, message_id: str, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "type": "ai",
        "content": content,
        "id": message_id,
        "name": None,
        "tool_calls": tool_calls or [],
        "invalid_tool_calls": [],
        "usage_metadata": None,
        "additional_kwargs": {},
        "response_metadata": {},
        "example": False,
    }


def ai_chunk(delta: str, message_id: str) -> dict[str, Any]:
    chunk = ai_message(delta, message_id)
    chunk["type"] = "AIMessageChunk"
    chunk["tool_call_chunks"] = []
    return chunk


def tool_message(
    content: str, *, call_id: str, name: str, message_id: str, is_error: bool
) -> dict[str, Any]:
    return {
        "type": "tool",
        "content": content,
        "tool_call_id": call_id,
        "name": name,
        "id": message_id,
        "status": "error" if is_error else "success",
        "artifact": None,
        "additional_kwargs": {},
        "response_metadata": {},
    }


def tool_call(raw: dict[str, Any]) -> dict[str, Any]:
    """A call from a `message` event (`name`, JSON `arguments`, `id`) as LangChain has it."""
    try:
        args = json.loads(str(raw.get("arguments") or "{}"))
    except json.JSONDecodeError:
        args = {"__raw__": raw.get("arguments")}
    return {"name": raw.get("name"), "args": args, "id": raw.get("id"), "type": "tool_call"}


def history_messages(turns: list[SessionMessage]) -> list[dict[str, Any]]:
    """A session's turns as the thread's `messages`: each run's input and its answer."""
    return [
        human_message(t.content, f"{t.run_id}-input")
        if t.role == "user"
        else ai_message(t.content, f"{t.run_id}-answer")
        for t in turns
    ]


def thread(
    session: SessionRecord,
    *,
    status: str,
    values: dict[str, Any],
    interrupts: list[InteractionPublic],
    updated_at: datetime | None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {**session.metadata, "graph_id": session.agent}
    return {
        "thread_id": shown_thread(session),
        "created_at": _iso(session.created_at),
        "updated_at": _iso(updated_at or session.created_at),
        "metadata": metadata,
        "status": status,
        "values": values,
        "interrupts": {ia.run_id: [interrupt(ia)] for ia in interrupts},
    }


def thread_state(
    session_id: str,
    *,
    values: dict[str, Any],
    checkpoint_id: str | None,
    parent_id: str | None,
    interrupts: list[InteractionPublic],
    created_at: datetime | None,
) -> dict[str, Any]:
    """A thread's state; Keel's checkpoints are its runs, so a checkpoint id is a run id."""
    lg_interrupts = [interrupt(ia) for ia in interrupts]
    tasks = [
        {
            "id": ia.run_id,
            "name": GRAPH_NODE,
            "error": None,
            "interrupts": [interrupt(ia)],
            "checkpoint": None,
            "state": None,
            "result": None,
        }
        for ia in interrupts
    ]

    def checkpoint(cid: str | None) -> dict[str, Any] | None:
        if cid is None:
            return None
        return {
            "thread_id": session_id,
            "checkpoint_ns": "",
            "checkpoint_id": cid,
            "checkpoint_map": None,
        }

    return {
        "values": values,
        "next": [GRAPH_NODE] if interrupts else [],
        "checkpoint": checkpoint(checkpoint_id)
        or {
            "thread_id": session_id,
            "checkpoint_ns": "",
            "checkpoint_id": None,
            "checkpoint_map": None,
        },
        "metadata": {"source": "loop", "step": len(values.get("messages", []))},
        "created_at": _iso(created_at),
        "parent_checkpoint": checkpoint(parent_id),
        "tasks": tasks,
        "interrupts": lg_interrupts,
    }


def cron(schedule: SchedulePublic) -> dict[str, Any]:
    """A schedule as a LangGraph cron: the input is sent back as the thread message it was."""
    return {
        "cron_id": schedule.id,
        "assistant_id": schedule.agent,
        "thread_id": None,
        "on_run_completed": "keep",
        "end_time": None,
        "schedule": " ".join(schedule.cron_expressions[:1]),
        "timezone": schedule.time_zone,
        "created_at": _iso(schedule.created_at),
        "updated_at": _iso(schedule.updated_at or schedule.created_at),
        "payload": {"input": {"messages": [{"role": "user", "content": schedule.input}]}},
        "user_id": schedule.created_by,
        "next_run_date": _iso(schedule.next_fire_times[0] if schedule.next_fire_times else None),
        "metadata": {"workspace": schedule.workspace},
        "enabled": not schedule.paused,
    }
