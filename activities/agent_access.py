"""A scheduled run's agent check as it fires: the agent's `roles:` against its creator's.

A schedule fires through Temporal, not the API, so the service's check
(`api.core.agent_access`) cannot see it; the run's first act is this one instead. The
worker hands in its catalogue lookup; a refusal is audited as the API audits one.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import activity

from keel.activities.store.audit import AuditEntry, AuditLog
from keel.workflows.activity_refs import AgentRoles
from keel.workflows.agent_roles import AgentRolesCheck, AgentRolesInput, roles_admit
from keel.workflows.run.agent_spec import AgentSpec

AgentLookup = Callable[[str], AgentSpec | None]


class AgentAccessActivities(AgentRoles):
    def __init__(self, agent: AgentLookup, audit: AuditLog) -> None:
        self._agent = agent
        self._audit = audit

    @activity.defn(name="check_agent_roles")
    async def check_agent_roles(self, request: AgentRolesInput) -> AgentRolesCheck:
        spec = self._agent(request.agent)
        if spec is None or roles_admit(spec.roles, request.roles):
            return AgentRolesCheck(allowed=True)  # an unknown agent fails as it always did
        # Once per run, whatever the retries.
        await self._audit.append_once(
            AuditEntry(
                tenant_id=request.tenant_id,
                actor=request.requester.removeprefix("user:"),
                category="auth",
                action="agent.refused",
                severity="warning",
                subject=request.run_id,  # one entry per refused run
                detail={
                    "agent": request.agent,
                    "reason": "roles",
                    "via": "schedule",
                    "schedule_id": request.schedule_id,
                    "agent_roles": list(spec.roles),
                    "caller_roles": list(request.roles),
                },
            )
        )
        return AgentRolesCheck(
            allowed=False,
            reason=f"The schedule's creator's roles may not use the agent '{request.agent}' "
            "any more, so this run did not start it; ask an admin for a role its agent file "
            "lists, or change the schedule's agent.",
        )
