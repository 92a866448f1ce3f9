"""The service's refusals in A2A's terms: the JSON-RPC errors the spec names.

One refusal has no error class in the a2a-sdk: Temporal (or Postgres) being unavailable,
which REST answers 503 with `Retry-After`. The SDK would render any other class as
-32603, an internal error a client should not retry; so the handler still raises
`InternalError` for it, notes the `Unavailable` in `watch_unavailable`, and the route
turns the answer into the same 503 with -32000 (a server error a client may retry).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from a2a.types import (
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.errors import A2AError

from keel.api.core.decisions import InteractionClosed
from keel.api.core.errors import (
    Conflict,
    Invalid,
    KeelError,
    Misconfigured,
    NotFound,
    Unavailable,
    is_store_away,
    store_unavailable,
)

__all__ = ["UNAVAILABLE_CODE", "a2a_error", "store_outages_refused", "watch_unavailable"]

Handler = TypeVar("Handler", bound=type)

# JSON-RPC's range for implementation-defined server errors: the service is unavailable.
UNAVAILABLE_CODE = -32000

_UNAVAILABLE: ContextVar[list[Unavailable] | None] = ContextVar("a2a_unavailable", default=None)


@contextmanager
def watch_unavailable() -> Iterator[list[Unavailable]]:
    """The `Unavailable` refusals `a2a_error` renders while the block runs (one request)."""
    seen: list[Unavailable] = []
    token = _UNAVAILABLE.set(seen)
    try:
        yield seen
    finally:
        _UNAVAILABLE.reset(token)


def a2a_error(exc: KeelError, *, cancelling: bool = False) -> A2AError:
    """The A2A error for a refusal; `cancelling` when it refused a CancelTask."""
    if isinstance(exc, NotFound):
        return TaskNotFoundError(message=exc.message)
    if isinstance(exc, InteractionClosed):
        return UnsupportedOperationError(message=exc.message)
    if isinstance(exc, Conflict) and cancelling:
        return TaskNotCancelableError(message=exc.message)
    if isinstance(exc, Unavailable):
        seen = _UNAVAILABLE.get()
        if seen is not None:
            seen.append(exc)
        return InternalError(message=exc.message)
    if isinstance(exc, Misconfigured):
        return InternalError(message=exc.message)  # an operator's to fix: not retryable
    if isinstance(exc, Invalid) and exc.field:
        return InvalidParamsError(message=f"{exc.field}: {exc.message}")
    return InvalidParamsError(message=exc.message)


def store_outages_refused(cls: Handler) -> Handler:
    """Make every `on_*` operation of a request handler answer a Postgres outage as the
    retryable refusal REST gives (503, -32000), not the SDK's -32603 for any exception:
    the SDK catches what a handler raises before a route could see it."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("on_"):
            continue
        if inspect.isasyncgenfunction(member):
            setattr(cls, name, _guarded_stream(member))
        elif inspect.iscoroutinefunction(member):
            setattr(cls, name, _guarded_call(member))
    return cls


def _guarded_call(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except Exception as exc:
            if is_store_away(exc):
                raise a2a_error(store_unavailable()) from exc
            raise

    return call


def _guarded_stream(method: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(method)
    async def stream(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        try:
            async for item in method(*args, **kwargs):
                yield item
        except Exception as exc:
            if is_store_away(exc):
                raise a2a_error(store_unavailable()) from exc
            raise

    return stream
