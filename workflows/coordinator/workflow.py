"""`CoordinatorWorkflow`: one task, several A2A agents, one merged report.

Each agent is reached through activities (send, then follow until it finishes),
so a crash in the middle resumes where it was. An agent that fails, cannot be
reached or runs out of time leaves its section marked; the others stand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import A2ADelegation
    from keel.workflows.coordinator.models import (
        AgentOutcome,
        CoordinatorInput,
        CoordinatorResult,
        DelegateHandle,
        DelegateInput,
        FollowInput,
        RemoteAgent,
    )
    from keel.workflows.run.findings import MergedFinding, merge_findings


@workflow.defn(name="CoordinatorWorkflow")
class CoordinatorWorkflow:
    @workflow.run
    async def run(self, request: CoordinatorInput) -> CoordinatorResult:
        outcomes = await asyncio.gather(
            *(self._delegate(request, index, agent) for index, agent in enumerate(request.agents))
        )
        found = merge_findings(
            [(o.agent_name, o.findings) for o in outcomes if o.findings is not None]
        )
        return CoordinatorResult(
            report=merge(request.task, outcomes, found), outcomes=outcomes, findings=found
        )

    async def _delegate(
        self, request: CoordinatorInput, index: int, agent: RemoteAgent
    ) -> AgentOutcome:
        try:
            handle = await run_activity(
                A2ADelegation.a2a_send,
                DelegateInput(
                    url=agent.url,
                    text=request.task,
                    message_id=f"{workflow.info().workflow_id}-{index}",
                    tenant_id=request.tenant_id,
                    requester=request.requester,
                ),
                timeouts.A2A_SEND,
            )
        except ActivityError as err:
            return AgentOutcome(
                url=agent.url,
                agent_name=agent.name or agent.url,
                status="unreachable",
                error=str(err.cause or err),
            )
        name = agent.name or handle.agent_name
        if handle.state in ("completed", "failed", "canceled", "rejected", "input-required"):
            return _outcome(agent, name, handle)
        try:
            final = await run_activity(
                A2ADelegation.a2a_follow,
                FollowInput(
                    handle=handle,
                    tenant_id=request.tenant_id,
                    requester=request.requester,
                    deadline_s=request.timeout_s,
                ),
                timeouts.a2a_follow(request.timeout_s),
            )
        except ActivityError as err:
            return AgentOutcome(
                url=agent.url,
                agent_name=name,
                status="failed",
                task_id=handle.task_id,
                error=str(err.cause or err),
            )
        return _outcome(agent, name, final)


def _outcome(agent: RemoteAgent, name: str, handle: DelegateHandle) -> AgentOutcome:
    status = {
        "completed": "completed",
        "input-required": "input_required",
        "working": "timed_out",
        "submitted": "timed_out",
    }.get(handle.state, "failed")
    return AgentOutcome(
        url=agent.url,
        agent_name=name,
        status=status,  # type: ignore[arg-type]
        task_id=handle.task_id,
        report=handle.report,
        error=handle.error,
        findings=handle.findings,
    )


def merge(task: str, outcomes: list[AgentOutcome], found: Sequence[MergedFinding] = ()) -> str:
    """One Markdown report: the merged findings (when the agents gave structured ones), then
    a section per agent, failures marked, in the order given."""
    done = sum(1 for o in outcomes if o.status == "completed")
    lines = [
        "# Coordinated report",
        "",
        f"Task: {task}",
        "",
        f"{done} of {len(outcomes)} agents answered.",
        "",
    ]
    if found:
        lines += ["## Findings", ""]
        for f in found:
            place = f"{f.file}:{f.line}" if f.line else f.file
            lines.append(f"- **{f.severity}** `{place}` — {f.title} ({', '.join(f.reported_by)})")
        lines.append("")
    for outcome in outcomes:
        lines.append(f"## {outcome.agent_name} — {outcome.status.replace('_', ' ')}")
        lines.append(f"<{outcome.url}>" + (f" · task {outcome.task_id}" if outcome.task_id else ""))
        lines.append("")
        if outcome.status == "completed":
            lines.append(outcome.report or "(no artifact)")
        else:
            lines.append(f"**This section is missing:** {outcome.error or outcome.status}.")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
