"""Validation errors in the words the user typed: `--every`, not `interval_s`.

The CLI checks a request body locally and the API checks it again; both report a
field by its schema name. Every place the CLI prints such an error names the flag
(or argument) that carries the field instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar

from keel.api.core.plain_errors import plain_message

# Request-body field -> what the user typed for it (`keel run`, `keel schedules create`);
# a command whose flags differ passes its own (e.g. `keel review` takes `--prompt`).
FLAGS: dict[str, str] = {
    "agent": "AGENT",
    "input": "PROMPT",
    "workspace": "--workspace",
    "model": "--model",
    "cron_expressions": "--cron",
    "interval_s": "--every",
    "interval_offset_s": "--offset",
    "time_zone": "--tz",
    "jitter_s": "--jitter",
    "overlap": "--overlap",
    "catchup_window_s": "--catchup",
    "paused": "--paused",
    "note": "--note",
    "approver": "--approver",
    "approval_expires_after_s": "--approval-expiry",
    "webhook_url": "--webhook",
    "schedule_id": "--id",
    "agents": "--agent",  # `keel coordinate`
    "cursor": "--cursor",  # list commands
    "limit": "--limit",
}
COMMAND_FLAGS: ContextVar[Mapping[str, str] | None] = ContextVar("command_flags", default=None)
"""The running command's own names (`keel review` takes the workspace as PATH), set when
it builds its request, so the API's answer to that request names them too."""
# FastAPI prefixes a field's location with where it came from.
_SOURCES = {"body", "query", "path"}


def field_label(loc: Sequence[object], flags: Mapping[str, str] | None = None) -> str:
    """The flag for a pydantic/FastAPI error location, else its dotted field path."""
    named = {**FLAGS, **(COMMAND_FLAGS.get() or {}), **(flags or {})}
    # A field the API names by its path (`agents.0.url`) is split as pydantic would.
    parts = [part for p in loc for part in str(p).split(".")]
    if parts and parts[0] in _SOURCES:
        parts = parts[1:]
    if parts and parts[0] in named:
        return named[parts[0]]
    return ".".join(parts)


def error_lines(
    errors: Iterable[Mapping[str, object]],
    default: str = "request",
    flags: Mapping[str, str] | None = None,
) -> list[str]:
    """`--every: Must be at least 1.`, one line per error; `flags` are the command's own
    names where they differ from `FLAGS`. A refusal that is a sentence of its own (Keel's
    `Unknown agent 'x'. Known agents: …`) about an argument is shown as it is, without a
    label; one about an option keeps the option's name, so the user sees which to fix."""
    lines = []
    for error in errors:
        loc = error.get("loc")
        where = field_label(loc if isinstance(loc, (list, tuple)) else [], flags) or default
        message = plain_message(error)
        own_sentence = (
            error.get("type") == "value_error" and str(error.get("msg", ""))[:1].isupper()
        )
        lines.append(
            message if own_sentence and not where.startswith("--") else f"{where}: {message}"
        )
    return lines
