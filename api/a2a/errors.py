"""The service's refusals in A2A's terms: the JSON-RPC errors the spec names."""

from __future__ import annotations

from a2a.types import (
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.errors import A2AError

from api.core.decisions import InteractionClosed
from api.core.errors import Conflict, Invalid, KeelError, NotFound, Unavailable

# JSON-RPC's range for implementation-defined server errors: the service is unavailable.
UNAVAILABLE_CODE = -32000


def a2a_error(exc: KeelError, *, cancelling: bool = False) -> A2AError:
    """The A2A error for a refusal; `cancelling` when it refused a CancelTask."""
    if isinstance(exc, NotFound):
        return TaskNotFoundError(message=exc.message)
    if isinstance(exc, InteractionClosed):
        return UnsupportedOperationError(message=exc.message)
    if isinstance(exc, Conflict) and cancelling:
        return TaskNotCancelableError(message=exc.message)
    if isinstance(exc, Unavailable):
        return InternalError(message=exc.message)
    if isinstance(exc, Invalid) and exc.field:
        return InvalidParamsError(message=f"{exc.field}: {exc.message}")
    return InvalidParamsError(message=exc.message)
