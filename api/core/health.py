"""Whether this API can serve: Temporal (and its namespace) and Postgres, each checked
within seconds."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from keel.activities.store.outage import is_store_outage
from keel.api.core.context import CoreParts
from keel.api.core.schemas.health import Health, Readiness
from keel.worker.cluster_check import ClusterReport, check_cluster

__all__ = ["HealthChecks"]

log = logging.getLogger("keel.api")
# A probe's own timeout is 4 s (deploy/k8s); both checks run at once.
READY_TIMEOUT_S = 2.0
# /health answers within this even when Postgres does not.
HEALTH_DATABASE_WAIT_S = 2.0


class HealthChecks:
    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts

    async def health(self) -> Health:
        """The database's state and the Temporal address; `unavailable` while Postgres is
        away (a bug in the check is raised, not reported as an outage)."""
        target = self._parts.temporal.service_client.config.target_host
        try:
            await asyncio.wait_for(self._parts.store.ping(), HEALTH_DATABASE_WAIT_S)
        except Exception as exc:
            if not (isinstance(exc, TimeoutError) or is_store_outage(exc)):
                raise
            return Health(status="unavailable", temporal=target, database="unavailable")
        return Health(status="ok", temporal=target, database="ok")

    async def readiness(self) -> Readiness:
        """Both dependencies answer within a couple of seconds and Temporal's namespace
        has what Keel needs (`keel setup temporal`), or what does not."""
        cluster, database_ok = await asyncio.gather(self._cluster(), _answers(self._ping()))
        temporal_ok = cluster is not None and cluster.ok
        return Readiness(
            status="ready" if temporal_ok and database_ok else "unready",
            temporal="ok" if temporal_ok else "unreachable" if cluster is None else "misconfigured",
            database="ok" if database_ok else "unreachable",
            problems=cluster.problems() if cluster is not None and not cluster.ok else None,
        )

    async def _cluster(self) -> ClusterReport | None:
        """What Temporal's namespace lacks for Keel; None when Temporal does not answer."""
        try:
            return await asyncio.wait_for(
                check_cluster(self._parts.temporal), timeout=READY_TIMEOUT_S
            )
        except Exception as exc:  # any failure means not ready; the reason goes to the log
            log.warning("readiness check failed: %s", type(exc).__name__)
            return None

    async def _ping(self) -> object:
        async with self._parts.store.pool.connection(timeout=READY_TIMEOUT_S) as conn:
            return await conn.execute("SELECT 1")


async def _answers(check: Awaitable[object]) -> bool:
    try:
        await asyncio.wait_for(check, timeout=READY_TIMEOUT_S)
    except Exception as exc:  # any failure means not ready; the reason goes to the log
        log.warning("readiness check failed: %s", type(exc).__name__)
        return False
    return True
