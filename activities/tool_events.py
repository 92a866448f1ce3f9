"""The `tool_call` and `tool_result` events a client sees, shaped in one place.

Written by the tool activities for calls that ran and by the LLM activity for the
gate's answers (errors, denials, cached copies), so both look the same to a client.
"""

from __future__ import annotations

__all__ = ["PREVIEW_CHARS", "ToolEvent", "tool_events"]

PREVIEW_CHARS = 200

ToolEvent = tuple[int, str, dict[str, object]]
"""(seq, type, data), as the store writes events."""


def tool_events(
    seq: int,
    *,
    step: int,
    call_id: str,
    name: str,
    arguments: str,
    output: str | None,
    is_error: bool,
    cached: bool = False,
) -> list[ToolEvent]:
    """The call at `seq` and its result at `seq + 1`.

    `output` is what the model reads; None for a cached copy, whose text the store
    copies from the first answer (so its size and preview are not known here).
    """
    result: dict[str, object] = {
        "step": step,
        "call_id": call_id,
        "name": name,
        "is_error": is_error,
        "cached": cached,
    }
    if output is not None:
        result["size"] = len(output.encode("utf-8", "surrogatepass"))
        result["preview"] = output[:PREVIEW_CHARS]
    else:
        result["preview"] = ""
    return [
        (
            seq,
            "tool_call",
            {"step": step, "call_id": call_id, "name": name, "arguments": arguments},
        ),
        (seq + 1, "tool_result", result),
    ]
