"""The run's notices to the outside: its webhook and the A2A push configs.

`RunNotices` tells a run's webhook (and each push config a client set) that the run
waits on a person or has finished. Each notice goes to a delivery workflow of its own
(`WebhookDeliveryWorkflow`), which retries it and outlives the run if it must, so a
receiver that is down delays a notice but never holds the run open or loses it.
"""

from __future__ import annotations

from typing import Literal, Protocol

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import WebhookDeliveries
    from keel.workflows.interactions.models import Interaction
    from keel.workflows.run.models import RunInput, RunState, RunStatus, StopReason
    from keel.workflows.webhooks.delivery import WebhookDeliveryWorkflow
    from keel.workflows.webhooks.models import (
        PushTargetsInput,
        WebhookDelivery,
        WebhookInteraction,
        WebhookNotice,
    )

__all__ = ["NoticeHost", "RunNotices", "webhook_interaction"]


class NoticeHost(Protocol):
    """What the agent run offers its notices: its state (figures, notices sent so far)."""

    _state: RunState


class RunNotices:
    """Hands the run's notices to their delivery workflows."""

    def __init__(self, host: NoticeHost) -> None:
        self._host = host

    async def notify(
        self,
        run: RunInput,
        status: RunStatus | Literal["waiting"],
        *,
        interactions: list[Interaction] | None = None,
        stop_reason: StopReason | None = None,
        error: str | None = None,
        report_preview: str = "",
    ) -> None:
        """Hand a notice to the run's webhook and push configs, if it has any."""
        if not run.webhook_url and not run.push_notifications:
            return
        state = self._host._state
        state.webhooks_sent += 1
        notice = WebhookNotice(
            id=f"{run.run_id}/{state.webhooks_sent}",
            event="run.waiting" if status == "waiting" else "run.finished",
            run_id=run.run_id,
            tenant_id=run.tenant_id,
            status=status,
            agent=run.agent.name,
            requester=run.requester,
            schedule_id=run.schedule_id,
            occurred_at=workflow.now(),
            stop_reason=stop_reason,
            error=error,
            report_preview=report_preview,
            steps=state.step,
            tool_calls=state.tool_calls,
            interactions=[webhook_interaction(i) for i in interactions or []],
            session_id=run.session_id if run.push_notifications else None,
        )
        if run.webhook_url:
            await self._hand_over(
                WebhookDelivery(url=run.webhook_url, notice=notice),
                f"{run.run_id}-webhook-{state.webhooks_sent}",
            )
        if run.push_notifications:
            # The configs as they are now: a client may set one at any time.
            pushes = await run_activity(
                WebhookDeliveries.push_targets,
                PushTargetsInput(run_id=run.run_id),
                timeouts.STORE_CALL,
                local=True,
                summary="push targets",
            )
            for target in pushes.targets:
                await self._hand_over(
                    WebhookDelivery(url=target.url, notice=notice, push_config_id=target.config_id),
                    f"{run.run_id}-push-{state.webhooks_sent}-{target.config_id}",
                )

    async def _hand_over(self, delivery: WebhookDelivery, delivery_id: str) -> None:
        """Start the delivery's own workflow, which outlives the run if it must."""
        try:
            await workflow.start_child_workflow(
                WebhookDeliveryWorkflow.run,
                delivery,
                id=delivery_id,
                parent_close_policy=ParentClosePolicy.ABANDON,
            )
        except WorkflowAlreadyStartedError:
            workflow.logger.warning("webhook notice %s was already handed over", delivery_id)


def webhook_interaction(interaction: Interaction) -> WebhookInteraction:
    """What a notice says of an interaction the run waits on."""
    return WebhookInteraction(
        id=interaction.id,
        kind=interaction.kind,
        tool=interaction.tool,
        subject=interaction.subject,
        risk=interaction.risk,
        payload_hash=interaction.payload_hash,
        approvers=interaction.approvers,
        expires_at=interaction.expires_at,
        question=interaction.question,
    )
