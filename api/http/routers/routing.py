"""The capability router's routes: tenants' enabled agents (admins) and a run's decisions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from keel.activities.store.router_store import StoredRouteDecision
from keel.api.core.router import RouterAgents
from keel.api.core.schemas.common import StoredText
from keel.api.http.deps import CurrentUser, ServiceDep
from keel.api.http.errors import AUTHENTICATED, documented

admin_router = APIRouter(
    prefix="/v1/admin/router", tags=["admin"], responses={**AUTHENTICATED, **documented(403)}
)
runs_router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=AUTHENTICATED)

TenantId = Annotated[StoredText, Path(min_length=1, max_length=128)]


class RouterAgentsUpdate(BaseModel):
    """The agents the router may pick for a tenant; an empty list enables none."""

    model_config = ConfigDict(extra="forbid")

    agents: list[Annotated[StoredText, Field(min_length=1, max_length=64)]] = Field(max_length=200)


@admin_router.get("/tenants/{tenant}", response_model=RouterAgents)
async def router_agents(tenant: TenantId, user: CurrentUser, service: ServiceDep) -> RouterAgents:
    """The agents the router may pick for the tenant (every catalogue agent by default)."""
    return await service.router.agents(tenant, user)


@admin_router.put("/tenants/{tenant}", response_model=RouterAgents)
async def set_router_agents(
    tenant: TenantId, body: RouterAgentsUpdate, user: CurrentUser, service: ServiceDep
) -> RouterAgents:
    """Enable exactly these agents for the tenant's router (audited)."""
    return await service.router.set_agents(tenant, body.agents, user)


@admin_router.delete("/tenants/{tenant}", status_code=204, responses=documented(404))
async def clear_router_agents(tenant: TenantId, user: CurrentUser, service: ServiceDep) -> Response:
    """Back to the default: every catalogue agent (audited)."""
    await service.router.clear_agents(tenant, user)
    return Response(status_code=204)


@runs_router.get(
    "/{run_id}/route", response_model=list[StoredRouteDecision], responses=documented(404)
)
async def route_decisions(
    run_id: StoredText, user: CurrentUser, service: ServiceDep
) -> list[StoredRouteDecision]:
    """A router run's decisions, one per round (empty for a run that named its agent)."""
    return await service.router.decisions(run_id, user)
