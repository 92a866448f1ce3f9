"""Health and the agent catalog."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from temporalio.client import Client

from keel.activities.store.outage import is_store_outage
from keel.activities.store.run_store import Store
from keel.api.core.router import router_agent
from keel.api.core.schemas import AgentPublic, Health, Liveness, Readiness
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, STORE_RETRY_AFTER_S, documented
from keel.worker.cluster_check import ClusterReport, check_cluster

router = APIRouter(tags=["system"])
log = logging.getLogger("keel.api")
# A probe's own timeout is 4 s (deploy/k8s); both checks run at once.
READY_TIMEOUT_S = 2.0

# /health answers within this even when Postgres does not.
HEALTH_DATABASE_WAIT_S = 2.0


@router.get("/health", response_model=Health, responses=documented(503))
async def health(service: ServiceDep) -> Health | JSONResponse:
    parts = service.parts
    target = parts.temporal.service_client.config.target_host
    try:
        await asyncio.wait_for(parts.store.ping(), HEALTH_DATABASE_WAIT_S)
    except Exception as exc:
        if not (isinstance(exc, TimeoutError) or is_store_outage(exc)):
            raise
        down = Health(status="unavailable", temporal=target, database="unavailable")
        return JSONResponse(
            down.model_dump(),
            status_code=503,
            headers={"Retry-After": str(STORE_RETRY_AFTER_S)},
        )
    return Health(status="ok", temporal=target, database="ok")


@router.get("/livez", response_model=Liveness)
async def livez() -> Liveness:
    """Liveness: the process answers. It checks nothing else, so an outage of Temporal or
    Postgres makes pods unready, never restarts them all."""
    return Liveness(status="ok")


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(service: ServiceDep) -> JSONResponse:
    """Readiness: Temporal and Postgres both answer within a couple of seconds, and
    Temporal's namespace has what Keel needs (`keel setup temporal`)."""
    parts = service.parts
    cluster, database_ok = await asyncio.gather(
        _cluster(parts.temporal), _answers(_ping(parts.store))
    )
    temporal_ok = cluster is not None and cluster.ok
    ready = temporal_ok and database_ok
    body = Readiness(
        status="ready" if ready else "unready",
        temporal="ok" if temporal_ok else "unreachable" if cluster is None else "misconfigured",
        database="ok" if database_ok else "unreachable",
        problems=cluster.problems() if cluster is not None and not cluster.ok else None,
    )
    return JSONResponse(body.model_dump(exclude_none=True), status_code=200 if ready else 503)


async def _cluster(temporal: Client) -> ClusterReport | None:
    """What Temporal's namespace lacks for Keel; None when Temporal does not answer."""
    try:
        return await asyncio.wait_for(check_cluster(temporal), timeout=READY_TIMEOUT_S)
    except Exception as exc:  # any failure means not ready; the reason goes to the log
        log.warning("readiness check failed: %s", type(exc).__name__)
        return None


async def _ping(store: Store) -> object:
    async with store.pool.connection(timeout=READY_TIMEOUT_S) as conn:
        return await conn.execute("SELECT 1")


async def _answers(check: Awaitable[object]) -> bool:
    try:
        await asyncio.wait_for(check, timeout=READY_TIMEOUT_S)
    except Exception as exc:  # any failure means not ready; the reason goes to the log
        log.warning("readiness check failed: %s", type(exc).__name__)
        return False
    return True


@router.get(
    "/v1/agents", response_model=list[AgentPublic], tags=["agents"], responses=AUTHENTICATED
)
async def list_agents(service: ServiceDep, user: CurrentUser) -> list[AgentPublic]:
    """The catalogue's agents the caller's roles may use, then `auto`, the router that
    picks one of them."""
    return [AgentPublic.from_spec(a) for a in [*service.access.usable(user), router_agent()]]
