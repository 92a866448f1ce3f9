"""Postgres being away, as the workflows see it: one named, retryable error.

Every activity that touches the store fails the same way while the database is
unreachable — a broken connection, a refused one, a pool that cannot hand one out —
so the workflows can retry it for as long as an outage may last
(`workflows/timeouts.py`, `STORE_OUTAGE_BUDGET`) instead of failing the run.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import PoolTimeout
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from keel.workflows.error_types import STORE_UNAVAILABLE

__all__ = ["STORE_OUTAGES", "STORE_UNAVAILABLE", "StoreOutageInterceptor", "is_store_outage"]

STORE_OUTAGES: tuple[type[Exception], ...] = (
    PoolTimeout,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
"""What psycopg raises when Postgres cannot be reached now (not when a statement is wrong)."""


def is_store_outage(exc: BaseException) -> bool:
    return isinstance(exc, STORE_OUTAGES)


class _StoreOutageActivities(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except Exception as exc:
            if is_store_outage(exc):
                raise ApplicationError(
                    f"Postgres is unavailable ({type(exc).__name__}: {exc}); retrying.",
                    type=STORE_UNAVAILABLE,
                ) from exc
            raise


class StoreOutageInterceptor(Interceptor):
    """Turns a store outage in any activity into a `StoreUnavailable` error."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _StoreOutageActivities(next)
