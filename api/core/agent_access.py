"""Which agents a caller may use: an agent file's `roles:` list, on every surface.

An agent that lists `roles:` is for callers whose token carries one of them (the JWT's
`roles` claim); one without is open to everyone. The rule is the router's
(`workflows.agent_roles`), so `agent: "auto"` and a run that names the agent agree.
Every surface reaches it through the service: a run started by name (REST, sessions,
A2A, MCP, LangGraph, AG-UI, the CLI), a session created on the agent, a schedule
created or changed, and every listing (`GET /v1/agents`, A2A cards, MCP's
`list_agents` and resources, LangGraph's assistants). A refusal is `Forbidden`,
audited once (category `auth`, action `agent.refused`).
"""

from __future__ import annotations

from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden
from keel.api.identity.auth import Principal
from keel.workflows.agent_roles import roles_admit
from keel.workflows.run.agent_spec import AgentSpec


def refusal_text(agent: str) -> str:
    """The sentence every surface gives for an agent the caller's roles may not use."""
    return (
        f"Your roles may not use the agent '{agent}'; ask an admin for a role its agent "
        "file lists, or choose one of the agents GET /v1/agents lists for you."
    )


class AgentAccess:
    """The one check of an agent's `roles:` list, and the listings it filters."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts

    @staticmethod
    def admits(agent: AgentSpec, user: Principal) -> bool:
        return roles_admit(agent.roles, user.roles)

    def catalog_agents(self) -> list[AgentSpec]:
        return self._parts.catalog.all()

    def usable(self, user: Principal) -> list[AgentSpec]:
        """The catalogue's agents the caller may use, by name (the router not included)."""
        return [a for a in self._parts.catalog.all() if self.admits(a, user)]

    def lookup(self, name: str, user: Principal) -> AgentSpec | None:
        """The catalogue agent `name`, if the caller may use it; None as for an unknown one."""
        agent = self._parts.catalog.get(name)
        return agent if agent is not None and self.admits(agent, user) else None

    async def require(self, agent: AgentSpec, user: Principal, *, via: str) -> None:
        """Refuse (`Forbidden`, audited) an agent the caller's roles may not use."""
        if self.admits(agent, user):
            return
        await self._parts.audit.forbidden(
            user,
            "agent.refused",
            agent.name,
            reason="roles",
            detail={
                "agent": agent.name,
                "via": via,
                "agent_roles": list(agent.roles),
                "caller_roles": list(user.roles),
            },
        )
        raise Forbidden(refusal_text(agent.name))
