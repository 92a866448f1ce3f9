"""The capability router as the service sees it: the `auto` agent, and tenants' settings.

A run of `agent: "auto"` is an ordinary run whose workflow picks the agent first
(`keel.workflows.router.workflow`); here it gets the router's spec and the caller's roles. Which
agents a tenant enables for it is admin configuration (scope `keel:admin`), audited;
with none set, every catalogue agent is enabled.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from keel.activities.store.router_store import RouterStore, StoredRouteDecision
from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden, Invalid, NotFound
from keel.api.core.tenant_ids import in_view
from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref
from keel.worker.agent_catalog import AgentCatalog
from keel.workflows.router.models import ROUTER_AGENT, RouteRequest
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.models import RunInput

if TYPE_CHECKING:  # runs.py imports this module for the `auto` agent
    from keel.api.core.runs import RunService

ROUTER_DESCRIPTION = (
    "Picks the agent for a request: filters the agents by tenant and role, asks the model "
    "which fits, asks back when unclear, and runs the chosen agent as a child run."
)


def router_agent() -> AgentSpec:
    """The `auto` agent: no tools, no prompt of its own; it runs no step loop."""
    return AgentSpec(name=ROUTER_AGENT, description=ROUTER_DESCRIPTION, system_prompt="")


def routable(catalog: AgentCatalog, name: str) -> AgentSpec | None:
    """The agent a surface may address by `name`: a catalogue agent, or the router."""
    return router_agent() if name == ROUTER_AGENT else catalog.get(name)


def with_route(run: RunInput, route_only: bool, user: Principal) -> RunInput:
    """The run, routed if its agent is `auto`: it carries the caller's roles to the filter."""
    if run.agent.name != ROUTER_AGENT:
        return run
    return run.model_copy(
        update={"route": RouteRequest(roles=list(user.roles), route_only=route_only)}
    )


class RouterAgents(BaseModel):
    """The agents a tenant enables for the router."""

    tenant_id: str
    agents: list[str] = Field(description="Agents the router may pick for the tenant.")
    default: bool = Field(description="True: no admin set them, so every catalogue agent.")
    updated_by: str | None = None
    updated_at: datetime | None = None


class RouterService:
    """Tenants' router settings (admins only) and a run's recorded decisions."""

    def __init__(self, parts: CoreParts, runs: RunService) -> None:
        self._parts = parts
        self._runs = runs
        self._store = RouterStore(parts.store.pool)

    async def agents(self, tenant_id: str, user: Principal) -> RouterAgents:
        await self._admin(user, "read")
        stored = await self._store.tenant_agents(tenant_id)
        if stored is None:
            return RouterAgents(
                tenant_id=tenant_id, agents=self._parts.catalog.names(), default=True
            )
        return RouterAgents(
            tenant_id=tenant_id,
            agents=stored.agents,
            default=False,
            updated_by=stored.updated_by,
            updated_at=stored.updated_at,
        )

    async def set_agents(self, tenant_id: str, agents: list[str], user: Principal) -> RouterAgents:
        """Enable exactly `agents` for the tenant's router (audited); unknown names refused."""
        await self._admin(user, "set")
        known = self._parts.catalog.names()
        unknown = sorted({a for a in agents if a not in known})
        if unknown:
            raise Invalid(f"Unknown agents {unknown}; the catalogue has {known}.", field="agents")
        distinct = sorted(set(agents))
        stored = await self._store.set_tenant_agents(
            tenant_id, distinct, user_ref(user), user.tenant_id
        )
        return RouterAgents(
            tenant_id=tenant_id,
            agents=stored.agents,
            default=False,
            updated_by=stored.updated_by,
            updated_at=stored.updated_at,
        )

    async def clear_agents(self, tenant_id: str, user: Principal) -> None:
        """Back to the default, every catalogue agent (audited)."""
        await self._admin(user, "clear")
        if not await self._store.clear_tenant_agents(tenant_id, user_ref(user), user.tenant_id):
            raise NotFound(f"Tenant {tenant_id} has no router agents set: it has the default.")

    async def decisions(self, run_id: str, user: Principal) -> list[StoredRouteDecision]:
        """The decisions of one of the caller's runs (404 for another tenant's, audited).

        Admins see every agent the rule filter left out; anyone else not those their
        roles exclude (`StoredRouteDecision.for_caller`)."""
        record = await self._runs.get(run_id, user)
        shown = in_view(record.tenant_id, record.id)  # the id as the tenant knows it
        stored = await self._store.decisions(record.id)
        if not user.is_admin:
            stored = [d.for_caller() for d in stored]
        return [d.model_copy(update={"run_id": shown}) for d in stored]

    async def _admin(self, user: Principal, action: str) -> None:
        if not user.is_admin:
            await self._parts.audit.admin_refused(user, f"router.{action}", "router")
            raise Forbidden("Router settings are for admins: they need the keel:admin scope.")
