"""A Keel run's events as AG-UI events, built with the `ag-ui-protocol` package's models.

Text streams as TEXT_MESSAGE_START / CONTENT / END from the model's live deltas (or at
once from the stored message when none came live); each tool call the model asks for
is TOOL_CALL_START / ARGS / END, and its outcome TOOL_CALL_RESULT. A pending approval
or question ends the stream: a CUSTOM `on_interrupt` event, then RUN_FINISHED with the
`interrupt` outcome. The request that carries the answer (`resume`) continues the same
durable run. Keel's own events (usage, compaction, sub-agents) go as CUSTOM `keel.*`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.events.hub import DeltaNotice
from keel.api.events.resume_point import ResumePoint
from keel.api.events.stream import Outgoing

__all__ = ["AgUiTranslator"]

PROTOCOL_VERSION = "1.0"
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
PendingLookup = Callable[[str], Awaitable[list[InteractionPublic]]]


class AgUiTranslator:
    """One AG-UI request's events for one Keel run, in the order the protocol requires."""

    def __init__(
        self,
        *,
        thread_id: str,
        request_run_id: str,
        keel_run_id: str,
        pending: PendingLookup,
        after_interactions: frozenset[str] = frozenset(),
    ) -> None:
        self._thread_id = thread_id
        self._run_id = request_run_id
        self._keel_run_id = keel_run_id
        self._pending = pending
        self._point = ResumePoint(0, after_interactions)
        self._open: dict[int, str] = {}
        """Steps whose text message is open (started, not ended)."""
        self._streamed: set[int] = set()
        self._calls: set[str] = set()
        self.finished = False

    def started(self) -> RunStartedEvent:
        return RunStartedEvent(
            thread_id=self._thread_id,
            run_id=self._run_id,
            protocol_version=PROTOCOL_VERSION,
            metadata={"keel_run_id": self._keel_run_id},
        )

    async def events(
        self, items: AsyncIterator[Outgoing | DeltaNotice | str]
    ) -> AsyncIterator[BaseEvent]:
        async for item in items:
            if isinstance(item, str):
                continue  # SSE comments of Keel's stream
            if isinstance(item, DeltaNotice):
                for event in self._delta(item) if self._point.live else []:
                    yield event
                continue
            if not self._point.sends(item):
                self._seen(item)
                continue
            for event in await self._event(item):
                yield event
            if self.finished:
                return

    async def _event(self, item: Outgoing) -> list[BaseEvent]:
        data: dict[str, Any] = item.record.data
        kind = item.type
        if kind == "message":
            return self._message(data)
        if kind == "tool_call":
            return self._call(str(data.get("call_id", "")), data, None)
        if kind == "tool_result":
            call_id = str(data.get("call_id", ""))
            return [
                *self._call(call_id, data, None),
                ToolCallResultEvent(
                    message_id=f"{self._keel_run_id}-tool-{call_id}",
                    tool_call_id=call_id,
                    content=str(data.get("preview") or ""),
                    role="tool",
                ),
            ]
        if kind == "interaction_pending":
            return await self._interrupt(data)
        if kind in ("done", "cancelled"):
            self.finished = True
            outcome = (
                RunFinishedSuccessOutcome() if kind == "done" else RunFinishedCancelledOutcome()
            )
            return [*self._close_all(), self._finished(outcome)]
        if kind == "error":
            self.finished = True
            message = str(data.get("error") or "The run failed.")
            return [*self._close_all(), RunErrorEvent(message=message, code="run_failed")]
        if kind in KEEL_ONLY_EVENTS:
            return [CustomEvent(name=f"keel.{kind}", value=data)]
        return []

    def _seen(self, item: Outgoing) -> None:
        """An event the client had before this request: its calls are announced already."""
        calls = item.record.data.get("tool_calls") if item.type == "message" else None
        if isinstance(calls, list):
            self._calls.update(str(c["id"]) for c in calls if isinstance(c, dict) and c.get("id"))

    def _delta(self, notice: DeltaNotice) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        message_id = self._message_id(notice.step)
        if notice.step not in self._open and notice.delta_index != 0:
            return []  # joined mid-message: the stored message comes whole instead
        if notice.step not in self._open:
            self._open[notice.step] = message_id
            events.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
        self._streamed.add(notice.step)
        events.append(TextMessageContentEvent(message_id=message_id, delta=notice.delta))
        return events

    def _message(self, data: dict[str, Any]) -> list[BaseEvent]:
        step = int(data.get("step", 0))
        message_id = self._message_id(step)
        events: list[BaseEvent] = []
        content = str(data.get("content") or "")
        if step in self._open:
            events.append(TextMessageEndEvent(message_id=self._open.pop(step)))
        elif step not in self._streamed and content:
            events += [
                TextMessageStartEvent(message_id=message_id, role="assistant"),
                TextMessageContentEvent(message_id=message_id, delta=content),
                TextMessageEndEvent(message_id=message_id),
            ]
        for call in data.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id"):
                events += self._call(str(call["id"]), call, message_id)
        return events

    def _call(self, call_id: str, data: dict[str, Any], parent: str | None) -> list[BaseEvent]:
        """START / ARGS / END for a call not announced yet (by its message, or its event)."""
        if not call_id or call_id in self._calls:
            return []
        self._calls.add(call_id)
        return [
            ToolCallStartEvent(
                tool_call_id=call_id,
                tool_call_name=str(data.get("name", "")),
                parent_message_id=parent,
            ),
            ToolCallArgsEvent(tool_call_id=call_id, delta=str(data.get("arguments") or "")),
            ToolCallEndEvent(tool_call_id=call_id),
        ]

    async def _interrupt(self, data: dict[str, Any]) -> list[BaseEvent]:
        waiting = await self._pending(self._keel_run_id)
        if not any(ia.id == data.get("interaction_id") for ia in waiting):
            return []  # decided since: the run went on
        self.finished = True
        interrupts = [_interrupt(ia) for ia in waiting]
        return [
            *self._close_all(),
            CustomEvent(
                name="on_interrupt",
                value=[i.model_dump(mode="json", by_alias=True) for i in interrupts],
            ),
            self._finished(RunFinishedInterruptOutcome(interrupts=interrupts)),
        ]

    def _finished(
        self,
        outcome: RunFinishedSuccessOutcome
        | RunFinishedInterruptOutcome
        | RunFinishedCancelledOutcome,
    ) -> RunFinishedEvent:
        return RunFinishedEvent(thread_id=self._thread_id, run_id=self._run_id, outcome=outcome)

    def _close_all(self) -> list[BaseEvent]:
        ended: list[BaseEvent] = [TextMessageEndEvent(message_id=m) for m in self._open.values()]
        self._open.clear()
        return ended

    def _message_id(self, step: int) -> str:
        return f"{self._keel_run_id}-step-{step}"


def _interrupt(ia: InteractionPublic) -> Interrupt:
    """A pending interaction as an AG-UI interrupt; a resume entry answers it by its id."""
    question = ia.kind == "ask_user"
    return Interrupt(
        id=ia.id,
        reason="question" if question else "tool_approval",
        message=ia.question if question else f"Approve {ia.tool} {ia.subject}?",
        expires_at=ia.expires_at.isoformat(),
        response_schema=_ANSWER if question else _APPROVAL,
        metadata={
            "run_id": ia.run_id,
            "tool": ia.tool,
            "arguments": ia.arguments,
            "payload_hash": ia.payload_hash,
            "risk": ia.risk,
            "approvers": ia.approvers,
        },
    )


_APPROVAL = {
    "type": "object",
    "properties": {
        "decision": {"enum": ["approve", "approve_always", "reject"]},
        "payload_hash": {"type": "string"},
        "text": {"type": "string"},
        "grant": {  # with approve_always: how far it reaches (docs/approvals.md)
            "type": "object",
            "properties": {
                "kind": {"enum": ["call", "run", "session", "agent"]},
                "pattern": {"type": "string"},
                "until": {"type": "string", "format": "date-time"},
            },
            "required": ["kind"],
        },
    },
    "required": ["decision"],
}
_ANSWER = {"type": "string"}
