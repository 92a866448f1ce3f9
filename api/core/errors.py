"""What the service refuses with: small named errors, rendered by each surface.

The service raises these; REST maps them to Problem JSON (`api.http.errors`), MCP to
tool errors (`api.mcp_server.tool_errors`) and A2A to JSON-RPC codes (`api.a2a`). Each
says in its message what went wrong and what to do next, and whether retrying helps.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "Conflict",
    "Forbidden",
    "Invalid",
    "KeelError",
    "NotFound",
    "Unauthenticated",
    "Unavailable",
]


class KeelError(Exception):
    """A refusal the caller can read: `message` is a sentence safe to show them."""

    retryable = False
    """Whether the same request may succeed later, unchanged."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(KeelError):
    """No such thing, or it belongs to another tenant (the two answer alike)."""


class Conflict(KeelError):
    """The request contradicts what exists: a taken id, a busy session, a closed interaction.

    `field` names the request field at fault when there is one (e.g. `run_id`).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class Forbidden(KeelError):
    """The caller is known but may not do this (not an approver, not an admin)."""


class Unauthenticated(KeelError):
    """No valid credentials; a new or corrected token may help."""


class Invalid(KeelError):
    """The request is malformed; `field` names the part at fault (`where` says where)."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        where: Literal["body", "query", "path", "header"] = "body",
        problems: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        self.where = where
        self.problems = problems
        """Every problem found, as pydantic reports them (`loc`, `msg`, `type`), if several."""


class Unavailable(KeelError):
    """A service Keel needs (Temporal, the key set) did not answer; retry later.

    `retry_after_s` is how long to wait, when known.
    """

    retryable = True

    def __init__(self, message: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
