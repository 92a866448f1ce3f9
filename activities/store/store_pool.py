"""The pool every table's store shares."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool


class PooledStore:
    """A store over Keel's connection pool."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]]) -> None:
        self._pool = pool

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConnection[dict[str, Any]]]:
        """The shared pool, for the other stores (interactions, audit) to use."""
        return self._pool
