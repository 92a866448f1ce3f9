"""What the scripted server reads off a request: the steps a compaction summary stands
for, a deterministic tag of the request, the files its `read_file` calls showed, and
the text of a message's content (a string or a list of parts), and a request's measured
size (`RequestSize`)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel

__all__ = [
    "RequestSize",
    "files_read",
    "first_user",
    "render",
    "request_tag",
    "summarised_steps",
    "text_of",
]

_SUMMARY_OF_STEPS = re.compile(r"^\[Summary of steps 1-(\d+) ")


class RequestSize(BaseModel):
    """One chat request as the server measured it."""

    tokens: int
    """Its size: messages and tool schemas."""
    prefix_tokens: int
    """How much of it repeats the previous request's beginning, message by message."""
    rejected: bool = False
    """Refused for being larger than the context window."""
    conversation: str = ""
    """Which conversation it belongs to: a digest of its system prompt and first user message."""


def summarised_steps(messages: list[object]) -> int:
    """The steps a compaction summary in the request stands for; 0 without one."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            match = _SUMMARY_OF_STEPS.match(text_of(message.get("content")))
            if match:
                return int(match[1])
    return 0


def request_tag(messages: list[object]) -> str:
    """A short deterministic tag of a request: its length and last message."""
    last = json.dumps(messages[-1] if messages else None, sort_keys=True)
    digest = hashlib.sha256(f"{len(messages)}:{last}".encode()).hexdigest()
    return f"_{digest[:8]}"


def render(content: str, messages: list[object]) -> str:
    """Fill `{files_read}` and `{tool_results}` from the request's messages."""
    tool_messages = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    if "{files_read}" in content:
        paths = files_read(messages, tool_messages)
        listing = "\n".join(f"- {path}" for path in paths) if paths else "- (none)"
        content = content.replace("{files_read}", listing)
    return content.replace("{tool_results}", str(len(tool_messages)))


def files_read(messages: list[object], tool_messages: list[dict[str, Any]]) -> list[str]:
    """Distinct `read_file` paths whose tool result exists and is not an error."""
    results = {m.get("tool_call_id"): text_of(m.get("content")) for m in tool_messages}
    paths: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict):
                continue
            function = call.get("function")
            if not isinstance(function, dict) or function.get("name") != "read_file":
                continue
            result = results.get(call.get("id"))
            if result is None or result.startswith("Error:"):
                continue
            try:
                arguments = json.loads(function.get("arguments") or "")
            except (TypeError, ValueError):
                continue
            path = arguments.get("path") if isinstance(arguments, dict) else None
            if isinstance(path, str) and path not in paths:
                paths.append(path)
    return paths


def first_user(messages: list[object]) -> object:
    """The content of a request's first user message, if it has one."""
    first = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    return first.get("content") if isinstance(first, dict) else None


def text_of(content: object) -> str:
    """The text of a message's content, whether a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""
