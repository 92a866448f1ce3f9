"""A scheduled run's first act: may the schedule's creator still use the agent?

A schedule fires through Temporal, so the API's check of the agent's `roles:` ran only
when the schedule was created or changed. The run carries its creator's roles
(`RunInput.acting_roles`) and checks them against the agent file the workers have now;
a refusal is audited by the activity and ends the run as failed, with the sentence
as its error. Runs without `acting_roles` (all but schedules', and schedules made
before the check) make no call, so their histories replay unchanged.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import AgentRoles
    from keel.workflows.agent_roles import AgentRolesInput
    from keel.workflows.run.models import RunInput

__all__ = ["refusal"]


async def refusal(run: RunInput) -> str | None:
    """The sentence that refuses the run if its acting roles may not use the agent; else None.

    The activity audits a refusal; the run then ends failed with the sentence as its error.
    """
    assert run.acting_roles is not None
    check = await run_activity(
        AgentRoles.check_agent_roles,
        AgentRolesInput(
            run_id=run.run_id,
            tenant_id=run.tenant_id,
            requester=run.requester,
            agent=run.agent.name,
            roles=run.acting_roles,
            schedule_id=run.schedule_id,
        ),
        timeouts.STORE_CALL,
        local=True,
    )
    return None if check.allowed else check.reason
