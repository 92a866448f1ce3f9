"""A Keel run's events as LangGraph stream parts, in the stream modes a client asked for.

The run's durable events (and its live token deltas) come from `RunEventStream`, the
same stream `/v1/runs/{id}/events/stream` serves; this module only reshapes them. A
LangGraph run ends where Keel's waits for a person: at a pending interaction the
stream sends the interrupt and ends, and the request that resumes it streams the same
durable run on from there.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.events.hub import DeltaNotice
from keel.api.events.resume_point import ResumePoint
from keel.api.events.stream import Outgoing
from keel.api.langgraph.wire import (
    GRAPH_NODE,
    TOOLS_NODE,
    ai_chunk,
    ai_message,
    human_message,
    interrupt,
    tool_call,
    tool_message,
)

__all__ = ["Outcome", "RunStreamTranslator", "StreamPart"]

KEEL_ONLY_EVENTS = frozenset(
    {
        "usage",
        "compaction",
        "child_run",
        "interaction_resolved",
        "route_decision",
        "memory",
        "rate_limited",
        "model_fallback",
    }
)
"""Events with no LangGraph counterpart: sent in `custom` mode as `{"type", "data"}`."""


@dataclass(frozen=True)
class StreamPart:
    """One SSE event: LangGraph's `event:` name, its JSON `data`, and the Keel seq as `id`."""

    event: str
    data: Any
    id: int | None = None

    def sse(self) -> str:
        body = json.dumps(self.data, ensure_ascii=False, default=str)
        head = f"event: {self.event}\ndata: {body}\n"
        return head + (f"id: {self.id}\n\n" if self.id is not None else "\n")


@dataclass
class Outcome:
    """Where the run stood when its stream ended."""

    status: str = "running"
    """`success`, `error`, `interrupted` (waiting on a person, or cancelled), `running`."""
    error: str | None = None
    interrupts: list[InteractionPublic] = field(default_factory=list)


PendingLookup = Callable[[str], Awaitable[list[InteractionPublic]]]
"""The run's pending interactions, read when an `interaction_pending` event arrives."""


class RunStreamTranslator:
    """Builds the thread's messages from a run's events and emits the parts asked for.

    `after_seq` / `after_interactions` say where a stream resumes: events up to that
    seq, or up to the `interaction_pending` of those interactions, only build state.
    """

    def __init__(
        self,
        run_id: str,
        *,
        modes: list[str],
        earlier: list[dict[str, Any]],
        pending: PendingLookup,
        after_seq: int = 0,
        after_interactions: frozenset[str] = frozenset(),
    ) -> None:
        self._run_id = run_id
        self._modes = set(modes)
        self.messages: list[dict[str, Any]] = list(earlier)
        self._pending = pending
        self._point = ResumePoint(after_seq, after_interactions)
        self._streamed: dict[int, str] = {}
        self.outcome = Outcome()

    @property
    def values(self) -> dict[str, Any]:
        return {"messages": list(self.messages)}

    def final_values(self) -> dict[str, Any]:
        """What `wait` and `join` answer: the state, with the interrupt or error if any."""
        values: dict[str, Any] = self.values
        if self.outcome.interrupts:
            values["__interrupt__"] = [interrupt(i) for i in self.outcome.interrupts]
        if self.outcome.status == "error":
            values["__error__"] = {"error": "RunError", "message": self.outcome.error}
        return values

    async def parts(
        self, items: AsyncIterator[Outgoing | DeltaNotice | str]
    ) -> AsyncIterator[StreamPart | str]:
        """The parts to send, ending at the run's end or at an interrupt; SSE comments
        (keepalives) pass through as strings."""
        async for item in items:
            if isinstance(item, str):
                yield item
                continue
            if isinstance(item, DeltaNotice):
                for part in self._delta(item) if self._point.live else []:
                    yield part
                continue
            for part in await self._event(item):
                yield part
            if self.outcome.status != "running":
                return

    # -- events ------------------------------------------------------------------

    async def _event(self, event: Outgoing) -> list[StreamPart]:
        data: dict[str, Any] = event.record.data
        emit = self._point.sends(event)
        parts: list[StreamPart] = []
        kind = event.type
        if kind == "run_started":
            self.messages.append(human_message(str(data.get("input", "")), f"{self._run_id}-input"))
            parts += self._values(event.seq)
        elif kind == "message":
            parts += self._message(event.seq, data)
        elif kind == "tool_call":
            parts += self._mode("events", self._tool_event("on_tool_start", data), event.seq)
        elif kind == "tool_result":
            parts += self._tool_result(event.seq, data)
        elif kind == "interaction_pending":
            return await self._interaction(event.seq, data) if emit else []
        elif kind == "done":
            self.outcome.status = "success"
            parts += self._values(event.seq)
        elif kind == "error":
            self.outcome.status, self.outcome.error = "error", str(data.get("error") or "")
            parts.append(
                StreamPart("error", {"error": "RunError", "message": self.outcome.error}, event.seq)
            )
        elif kind == "cancelled":
            self.outcome.status = "interrupted"
            parts += self._values(event.seq)
        elif kind in KEEL_ONLY_EVENTS:
            parts += self._mode("custom", {"type": kind, "data": data}, event.seq)
        return parts if emit else []

    async def _interaction(self, seq: int, data: dict[str, Any]) -> list[StreamPart]:
        waiting = await self._pending(self._run_id)
        if not any(i.id == data.get("interaction_id") for i in waiting):
            return []  # decided since: the run went on
        self.outcome.status, self.outcome.interrupts = "interrupted", waiting
        interrupts = [interrupt(i) for i in waiting]
        return [
            *self._mode("values", {**self.values, "__interrupt__": interrupts}, seq),
            *self._mode("updates", {"__interrupt__": interrupts}, seq),
        ]

    def _message(self, seq: int, data: dict[str, Any]) -> list[StreamPart]:
        step = int(data.get("step", 0))
        calls = [tool_call(c) for c in data.get("tool_calls") or [] if isinstance(c, dict)]
        message = ai_message(str(data.get("content") or ""), self._ai_id(step), calls)
        self.messages.append(message)
        parts = [
            *self._values(seq),
            *self._mode("updates", {GRAPH_NODE: {"messages": [message]}}, seq),
            *self._mode("messages/complete", [message], seq, mode="messages"),
            *self._mode("events", self._model_event("on_chat_model_end", message, step), seq),
        ]
        if step not in self._streamed:  # no tokens came live: the whole message at once
            parts += self._mode("messages", [message, self._meta(step)], seq, mode="messages-tuple")
        return parts

    def _tool_result(self, seq: int, data: dict[str, Any]) -> list[StreamPart]:
        call_id = str(data.get("call_id", ""))
        message = tool_message(
            str(data.get("preview") or ""),
            call_id=call_id,
            name=str(data.get("name", "")),
            message_id=f"{self._run_id}-tool-{call_id}",
            is_error=bool(data.get("is_error")),
        )
        self.messages.append(message)
        step = int(data.get("step", 0))
        return [
            *self._values(seq),
            *self._mode("updates", {TOOLS_NODE: {"messages": [message]}}, seq),
            *self._mode("messages", [message, self._meta(step, TOOLS_NODE)], seq, "messages-tuple"),
            *self._mode("events", self._tool_event("on_tool_end", data), seq),
        ]

    def _delta(self, notice: DeltaNotice) -> list[StreamPart]:
        message_id = self._ai_id(notice.step)
        if notice.step not in self._streamed and notice.delta_index != 0:
            return []  # joined mid-message: the stored message comes whole instead
        text = self._streamed.get(notice.step, "") + notice.delta
        if notice.delta_index == 0:
            text = notice.delta  # a retried step starts again
        self._streamed[notice.step] = text
        chunk = ai_chunk(notice.delta, message_id)
        parts = [
            *self._mode("messages", [chunk, self._meta(notice.step)], None, "messages-tuple"),
            *self._mode("events", self._model_event("on_chat_model_stream", chunk, notice.step)),
        ]
        if "messages" in self._modes:
            if notice.delta_index == 0:
                parts.append(StreamPart("messages/metadata", {message_id: self._meta(notice.step)}))
            parts.append(StreamPart("messages/partial", [ai_message(text, message_id)]))
        return parts

    # -- shapes ------------------------------------------------------------------

    def _values(self, seq: int) -> list[StreamPart]:
        return self._mode("values", self.values, seq)

    def _mode(
        self, event: str, data: Any, seq: int | None = None, mode: str | None = None
    ) -> list[StreamPart]:
        """The part if the client asked for its mode (by default the event's own name)."""
        return [StreamPart(event, data, seq)] if (mode or event) in self._modes else []

    def _ai_id(self, step: int) -> str:
        return f"{self._run_id}-step-{step}"

    def _meta(self, step: int, node: str = GRAPH_NODE) -> dict[str, Any]:
        return {"run_id": self._run_id, "langgraph_node": node, "langgraph_step": step}

    def _model_event(self, name: str, message: dict[str, Any], step: int) -> dict[str, Any]:
        key = "chunk" if name == "on_chat_model_stream" else "output"
        return {
            "event": name,
            "name": "model",
            "run_id": self._run_id,
            "tags": [],
            "metadata": self._meta(step),
            "data": {key: message},
            "parent_ids": [],
        }

    def _tool_event(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        detail: dict[str, Any] = (
            {"input": data.get("arguments")}
            if name == "on_tool_start"
            else {"output": data.get("preview"), "is_error": data.get("is_error")}
        )
        return {
            "event": name,
            "name": data.get("name"),
            "run_id": str(data.get("call_id", "")),
            "tags": [],
            "metadata": self._meta(int(data.get("step", 0)), TOOLS_NODE),
            "data": detail,
            "parent_ids": [self._run_id],
        }
