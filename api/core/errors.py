"""What the service refuses with: small named errors, rendered by each surface.

The service raises these; REST maps them to Problem JSON (`api.http.errors`), MCP to
tool errors (`api.mcp_server.tool_errors`) and A2A to JSON-RPC codes (`api.a2a`). Each
says in its message what went wrong and what to do next, and whether retrying helps.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationError

from keel.activities.store.outage import STORE_OUTAGES
from keel.api.core.plain_errors import plain_message

__all__ = [
    "Conflict",
    "Forbidden",
    "Invalid",
    "KeelError",
    "Misconfigured",
    "NotFound",
    "OverQuota",
    "Unauthenticated",
    "Unavailable",
    "invalid_request",
    "known_id",
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


class OverQuota(Unavailable):
    """The tenant (or the caller within it) has reached a quota: no new run starts until
    it resets, `retry_after_s` from now (REST: 429 with `Retry-After`). An `Unavailable`,
    so every surface that says "retry later" says it here too."""


class Misconfigured(KeelError):
    """Keel's setup is wrong (a Temporal namespace or its search attributes missing,
    credentials refused): the message names the cause and what an operator must run.
    Retrying will not help until they do; surfaces answer with a 500-class error."""


# What a client is told to wait before trying again while Postgres is away.
STORE_RETRY_AFTER_S = 5
STORE_UNAVAILABLE_DETAIL = (
    "Keel's database is unavailable right now; nothing was changed by this request "
    "unless it says otherwise. Try again in a few seconds."
)


def store_unavailable() -> Unavailable:
    """The refusal every surface gives while Postgres is away (REST: 503, A2A: -32000)."""
    return Unavailable(STORE_UNAVAILABLE_DETAIL, retry_after_s=STORE_RETRY_AFTER_S)


STORE_AWAY: tuple[type[Exception], ...] = STORE_OUTAGES
"""What the service's methods let through while Postgres is away (a broken, refused or
unobtainable connection): a surface answers each as `store_unavailable()`."""


def is_store_away(exc: BaseException) -> bool:
    """Whether `exc` says Postgres is away now (not that a statement was wrong)."""
    return isinstance(exc, STORE_AWAY)


def invalid_request(exc: ValidationError) -> Invalid:
    """pydantic's errors as one `Invalid`: the first names the field, all are kept."""
    problems = [
        {"loc": ["body", *e["loc"]], "msg": plain_message(e), "type": e["type"]}
        for e in exc.errors()
    ]
    first = problems[0] if problems else {"loc": ["body"], "msg": str(exc)}
    field = ".".join(str(p) for p in first["loc"][1:]) or None
    return Invalid(
        f"{field}: {first['msg']}" if field else str(first["msg"]), field=field, problems=problems
    )


MAX_ID_CHARS = 255


def known_id(value: str, kind: str) -> str:
    """An id to look up: one no store or Temporal could hold (a NUL, too long) is refused
    with a sentence, before it reaches a query that would fail on it."""
    if "\x00" in value:
        raise Invalid(
            f"A {kind} id cannot contain NUL (\\u0000) characters; check the id and retry.",
            field=f"{kind}_id",
            where="path",
        )
    if len(value) > MAX_ID_CHARS:
        raise Invalid(
            f"A {kind} id is at most {MAX_ID_CHARS} characters; this one has {len(value)}.",
            field=f"{kind}_id",
            where="path",
        )
    return value
