"""What Temporal's refusals mean, as the service's errors: one mapping for every call.

Temporal answers a call with a gRPC status. Only some of them mean "try again later":
the server (or the path to it) being unavailable, a deadline passing, a rate limit. The
rest mean Keel's setup is wrong — the namespace does not exist, Keel's search attributes
are not registered on it, Keel's credentials are refused — and no retry will fix them:
those are `Misconfigured` (a 500-class answer naming the cause and what to run), and the
detail is logged once per process for the operator.

Call sites that expect a status as an answer (a workflow that has ended is `NOT_FOUND`,
an unparsable cursor is `INVALID_ARGUMENT`) check for it first and hand the rest here;
`namespace_missing` tells a namespace's `NOT_FOUND` from a workflow's.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from temporalio.service import RPCError, RPCStatusCode

from keel.api.core.context import RETRY_AFTER_S
from keel.api.core.errors import KeelError, Misconfigured, Unavailable

__all__ = [
    "RETRYABLE",
    "from_temporal",
    "namespace_missing",
    "search_attributes_missing",
    "temporal_call",
    "temporal_refusals",
]

Service = TypeVar("Service", bound=type)

log = logging.getLogger("keel.api.temporal")

RETRYABLE = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,  # Temporal's rate limits: later will do
        RPCStatusCode.CANCELLED,  # the call's own timeout, or a connection dropped
        RPCStatusCode.ABORTED,  # a concurrent change won; the same call again may not lose
    }
)
"""Statuses that say Temporal may take the same call later: the answer is a 503."""

SETUP_COMMAND = "keel setup temporal"

_logged: set[tuple[str, str]] = set()
_logged_lock = threading.Lock()
_MAX_LOGGED = 1000


def namespace_missing(err: RPCError) -> bool:
    """Temporal's answer naming the namespace itself as unknown (not a workflow in it)."""
    return err.status == RPCStatusCode.NOT_FOUND and "namespace" in err.message.lower()


def search_attributes_missing(err: RPCError) -> bool:
    """Temporal's answer to an attribute the namespace has not registered (or typed so)."""
    return err.status == RPCStatusCode.INVALID_ARGUMENT and "search attribute" in (
        err.message.lower()
    )


def from_temporal(
    err: RPCError, *, doing: str, namespace: str, retry: str | None = None
) -> KeelError:
    """The error to raise for `err`, Temporal's refusal of the call that was to `doing`
    (e.g. "start the run"). `retry` is the sentence for a 503, if the caller has one that
    says more than "retry shortly"."""
    if err.status in RETRYABLE:
        return Unavailable(
            retry or f"Temporal did not answer in time, so Keel could not {doing}; retry shortly.",
            retry_after_s=RETRY_AFTER_S,
        )
    detail = err.message.strip().rstrip(".") or err.status.name
    if namespace_missing(err):
        sentence = (
            f"Keel could not {doing}: Temporal has no namespace '{namespace}' ({detail}). "
            f"An operator must create it (`{SETUP_COMMAND}` does, on a cluster that allows "
            "it) or point TEMPORAL_NAMESPACE at one that exists; retrying will not help."
        )
    elif search_attributes_missing(err):
        sentence = (
            f"Keel could not {doing}: Temporal namespace '{namespace}' does not have Keel's "
            f"search attributes registered ({detail}). An operator must run "
            f"`{SETUP_COMMAND}` against this cluster; retrying will not help until then."
        )
    elif err.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNAUTHENTICATED):
        sentence = (
            f"Keel could not {doing}: Temporal refused Keel's credentials for namespace "
            f"'{namespace}' ({detail}). An operator must give Keel's Temporal identity "
            "access to the namespace; retrying will not help until then."
        )
    else:
        sentence = (
            f"Keel could not {doing}: Temporal refused the call with {err.status.name} "
            f"({detail}). This is a fault in Keel's setup or Keel, not in the request; "
            f"the server logged it, and `{SETUP_COMMAND} --check` reports what is missing."
        )
    _log_once(err, doing, namespace)
    return Misconfigured(sentence)


@contextmanager
def temporal_call(doing: str, namespace: str, *, retry: str | None = None) -> Iterator[None]:
    """Run the block's Temporal calls with their refusals mapped by `from_temporal`."""
    try:
        yield
    except RPCError as err:
        raise from_temporal(err, doing=doing, namespace=namespace, retry=retry) from err


def temporal_refusals(doing: str) -> Callable[[Service], Service]:
    """Map what Temporal refuses in every public coroutine method of a service class (one
    holding `self._parts`), for the calls it makes without expecting a status itself."""

    def decorate(cls: Service) -> Service:
        for name, member in list(vars(cls).items()):
            if not name.startswith("_") and inspect.iscoroutinefunction(member):
                setattr(cls, name, _mapped(member, doing))
        return cls

    return decorate


def _mapped(method: Callable[..., Awaitable[Any]], doing: str) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with temporal_call(doing, self._parts.namespace):
            return await method(self, *args, **kwargs)

    return call


def _log_once(err: RPCError, doing: str, namespace: str) -> None:
    """Log a setup fault with its detail the first time this process meets it: every
    request meets it until an operator acts, and one line says all there is."""
    # Temporal names one missing attribute of several, a different one each time.
    cause = "search attributes" if search_attributes_missing(err) else err.message
    key = (f"{namespace}:{err.status.name}", cause)
    with _logged_lock:
        if key in _logged:
            return
        if len(_logged) < _MAX_LOGGED:
            _logged.add(key)
    log.error(
        "Temporal refused to %s in namespace %r with %s: %s (logged once per cause)",
        doing,
        namespace,
        err.status.name,
        err.message,
    )
