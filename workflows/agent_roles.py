"""Who may use an agent: its file's `roles:` list, the one rule every surface applies.

Pure code, shared by the service (a run named directly, listings, cards) and the
router's rule filter (`agent: "auto"`), so the two can never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field


def roles_admit(agent_roles: Iterable[str], caller_roles: Iterable[str]) -> bool:
    """Whether a caller with `caller_roles` may use an agent limited to `agent_roles`.

    An agent with no roles is open to everyone; otherwise one shared role is enough.
    """
    wanted = set(agent_roles)
    return not wanted or bool(wanted & set(caller_roles))


class AgentRolesInput(BaseModel):
    """Input of `check_agent_roles`: may whom a scheduled run acts for still use its agent?"""

    run_id: str
    tenant_id: str
    requester: str
    agent: str
    roles: list[str] = Field(default_factory=list)
    schedule_id: str | None = None


class AgentRolesCheck(BaseModel):
    """Output of `check_agent_roles`; `reason` is the refusal sentence when not allowed."""

    allowed: bool
    reason: str = ""
