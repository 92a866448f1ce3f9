"""Keel's checkpoints as LangGraph sees them: one per step of each run of a thread.

A checkpoint id is `RUN_ID@STEP` (a run id alone names its last step): what the thread
held after that model call and its tool results. A run created on a thread at a
checkpoint forks the run there (`KeelService.forks`), so LangGraph's "time travel" is
Keel's rewind and fork.
"""

from __future__ import annotations

from typing import Any

from keel.activities.store.records import MessageRecord
from keel.api.core.errors import Invalid
from keel.api.langgraph import wire

__all__ = ["checkpoint_id", "parse_checkpoint", "step_values"]

SEPARATOR = "@"
"""Not a character of an id (`ID_PATTERN`), so a run id with the step splits one way."""


def checkpoint_id(run_id: str, step: int) -> str:
    return f"{run_id}{SEPARATOR}{step}"


def parse_checkpoint(raw: str) -> tuple[str, int | None]:
    """The run and step a checkpoint id names (no step: the run's last)."""
    run_id, sep, step = raw.rpartition(SEPARATOR)
    if not sep:
        return raw, None
    if not run_id or not step.isdigit():
        raise Invalid(
            f"Checkpoint {raw!r} is not one of Keel's: they read RUN_ID{SEPARATOR}STEP, as "
            "threads/{thread_id}/history lists them.",
            field="checkpoint_id",
        )
    return run_id, int(step)


def step_values(messages: list[MessageRecord], run_id: str) -> list[tuple[int, list[Any]]]:
    """Each step of the run (1, 2, …) and the run's messages up to it, as LangChain
    messages (the system prompt left out)."""
    shown = [_message(m, run_id, index) for index, m in enumerate(messages)]
    last = max((m.step for m in messages if m.role == "assistant"), default=0)
    return [
        (step, [s for s, m in zip(shown, messages, strict=True) if s and m.step <= step])
        for step in range(1, last + 1)
    ]


def _message(m: MessageRecord, run_id: str, index: int) -> dict[str, Any] | None:
    message_id = f"{run_id}-{m.step}-{index}"
    content = m.content or ""
    if m.role == "user":
        return wire.human_message(content, message_id)
    if m.role == "assistant":
        calls = [wire.tool_call(_event_call(c)) for c in m.tool_calls or []]
        return wire.ai_message(content, message_id, calls)
    if m.role == "tool":
        return wire.tool_message(
            content,
            call_id=m.tool_call_id or "",
            name=m.name or "",
            message_id=message_id,
            is_error=m.is_error,
        )
    return None


def _event_call(stored: dict[str, object]) -> dict[str, Any]:
    """A stored call (OpenAI's shape) as a `message` event has it: name, arguments, id."""
    function = stored.get("function")
    spec: dict[str, Any] = function if isinstance(function, dict) else {}
    return {"name": spec.get("name"), "arguments": spec.get("arguments"), "id": stored.get("id")}
