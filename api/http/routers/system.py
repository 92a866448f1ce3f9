"""Health and the agent catalog."""

from __future__ import annotations

from fastapi import APIRouter

from api.core.schemas import AgentPublic, Health
from api.http.deps import CurrentUser, ServiceDep
from api.http.errors import AUTHENTICATED

router = APIRouter(tags=["system"])


@router.get("/health", response_model=Health)
async def health(service: ServiceDep) -> Health:
    parts = service.parts
    await parts.store.list_runs(tenant_id="default", limit=1)
    target = parts.temporal.service_client.config.target_host
    return Health(status="ok", temporal=target, database="ok")


@router.get(
    "/v1/agents", response_model=list[AgentPublic], tags=["agents"], responses=AUTHENTICATED
)
async def list_agents(service: ServiceDep, user: CurrentUser) -> list[AgentPublic]:
    return [
        AgentPublic(
            name=a.name,
            description=a.description,
            tools=a.tools,
            model=a.model,
            mcp_servers=[server.name for server in a.mcp_servers],
        )
        for a in service.parts.catalog.all()
    ]
