"""Health and the agent catalog."""

from __future__ import annotations

from fastapi import APIRouter

from api.core.schemas import AgentPublic, Health
from api.http.deps import CatalogDep, CurrentUser, StoreDep, TemporalDep
from api.http.errors import AUTHENTICATED

router = APIRouter(tags=["system"])


@router.get("/health", response_model=Health)
async def health(temporal: TemporalDep, store: StoreDep) -> Health:
    await store.list_runs(tenant_id="default", limit=1)
    return Health(status="ok", temporal=temporal.service_client.config.target_host, database="ok")


@router.get(
    "/v1/agents", response_model=list[AgentPublic], tags=["agents"], responses=AUTHENTICATED
)
async def list_agents(catalog: CatalogDep, user: CurrentUser) -> list[AgentPublic]:
    return [
        AgentPublic(
            name=a.name,
            description=a.description,
            tools=a.tools,
            model=a.model,
            mcp_servers=[server.name for server in a.mcp_servers],
        )
        for a in catalog.all()
    ]
