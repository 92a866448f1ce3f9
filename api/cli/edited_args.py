"""`keel approve --args`: the edited arguments, from a file or inline JSON, and their diff."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["ArgumentsError", "argument_changes", "read_arguments"]


class ArgumentsError(ValueError):
    """`--args` is neither a readable JSON file nor a JSON object."""


def read_arguments(value: str) -> dict[str, object]:
    """`value` as a JSON object: inline when it starts with `{`, else a file's content."""
    text = value
    if not value.lstrip().startswith("{"):
        path = Path(value).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ArgumentsError(
                f"--args {value}: not a JSON object, and no file can be read there "
                f"({exc.strerror}). Give a JSON object or the path of a file holding one."
            ) from exc
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgumentsError(
            f"--args is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})."
        ) from exc
    if not isinstance(parsed, dict):
        raise ArgumentsError("--args must be a JSON object of the tool's arguments.")
    return parsed


def argument_changes(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """One line per argument the edit changes, adds or removes."""
    lines = []
    for key in sorted({*before, *after}):
        old, new = before.get(key), after.get(key)
        if key not in after:
            lines.append(f"- {key}: {json.dumps(old)}")
        elif key not in before:
            lines.append(f"+ {key}: {json.dumps(new)}")
        elif old != new:
            lines.append(f"~ {key}: {json.dumps(old)} -> {json.dumps(new)}")
    return lines
