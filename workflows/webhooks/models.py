"""Webhook payloads: the notice a receiver gets, its delivery and A2A push targets."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from keel.workflows.gate.tool_specs import Risk
from keel.workflows.interactions.models import InteractionKind
from keel.workflows.run.models import RunStatus, StopReason
from keel.workflows.usage.models import TreeUsage

WebhookEvent = Literal["run.waiting", "run.finished"]


class WebhookInteraction(BaseModel):
    """An approval request or question, as a webhook receiver sees it (no arguments)."""

    id: str
    kind: InteractionKind
    tool: str
    subject: str
    risk: Risk
    payload_hash: str
    approvers: list[str]
    expires_at: datetime
    question: str | None = None


class WebhookNotice(BaseModel):
    """The JSON body POSTed to a run's webhook."""

    id: str = Field(description="Delivery id, the same on every retry: deduplicate on it.")
    event: WebhookEvent
    run_id: str
    tenant_id: str
    status: RunStatus | Literal["waiting"] = Field(
        description="`waiting` for `run.waiting`; else how the run ended."
    )
    agent: str
    requester: str
    schedule_id: str | None = None
    occurred_at: datetime
    stop_reason: StopReason | None = None
    error: str | None = None
    report_preview: str = ""
    steps: int = 0
    tool_calls: int = 0
    interactions: list[WebhookInteraction] = Field(
        default_factory=list, description="`run.waiting`: what the run waits on."
    )
    session_id: str | None = Field(
        default=None, description="The run's session (an A2A task's contextId)."
    )
    usage: TreeUsage | None = Field(
        default=None,
        description="Tokens and cost of the run and its sub-agent runs when the notice was "
        "sent, from their recorded model calls.",
    )


class WebhookDelivery(BaseModel):
    """Input of `WebhookDeliveryWorkflow` and `deliver_webhook`."""

    url: str
    notice: WebhookNotice
    push_config_id: str | None = Field(
        default=None,
        description="An A2A push config of the run's task: send the notice as an A2A task "
        "update, with the config's token (looked up at delivery, never in history).",
    )


class PushTargetsInput(BaseModel):
    """Input of `push_targets`."""

    run_id: str


class PushTarget(BaseModel):
    """One A2A push config a notice goes to: its id and URL (its token stays in Postgres)."""

    config_id: str
    url: str


class PushTargets(BaseModel):
    """Output of `push_targets`: the task's push configs now."""

    targets: list[PushTarget] = Field(default_factory=list)


class WebhookReceipt(BaseModel):
    """Output of `deliver_webhook`: the receiver took the notice."""

    status_code: int
    attempt: int
