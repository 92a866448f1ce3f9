"""Health and the agent catalog."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from keel.api.core.router import router_agent
from keel.api.core.schemas.agents import AgentPublic
from keel.api.core.schemas.health import Health, Liveness, Readiness
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, STORE_RETRY_AFTER_S, documented

router = APIRouter(tags=["system"])


@router.get("/health", response_model=Health, responses=documented(503))
async def health(service: ServiceDep) -> Health | JSONResponse:
    found = await service.health.health()
    if found.status != "ok":
        return JSONResponse(
            found.model_dump(),
            status_code=503,
            headers={"Retry-After": str(STORE_RETRY_AFTER_S)},
        )
    return found


@router.get("/livez", response_model=Liveness)
async def livez() -> Liveness:
    """Liveness: the process answers. It checks nothing else, so an outage of Temporal or
    Postgres makes pods unready, never restarts them all."""
    return Liveness(status="ok")


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(service: ServiceDep) -> JSONResponse:
    """Readiness: Temporal and Postgres both answer within a couple of seconds, and
    Temporal's namespace has what Keel needs (`keel setup temporal`)."""
    body = await service.health.readiness()
    ready = body.status == "ready"
    return JSONResponse(body.model_dump(exclude_none=True), status_code=200 if ready else 503)


@router.get(
    "/v1/agents", response_model=list[AgentPublic], tags=["agents"], responses=AUTHENTICATED
)
async def list_agents(service: ServiceDep, user: CurrentUser) -> list[AgentPublic]:
    """The catalogue's agents the caller's roles may use, then `auto`, the router that
    picks one of them."""
    return [AgentPublic.from_spec(a) for a in [*service.access.usable(user), router_agent()]]
