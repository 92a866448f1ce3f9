"""Tenant quotas in the run: a scheduled run's check as it fires, and the stop after a step.

A run the API starts was checked before it started (`api.core.quotas`); a schedule fires
through Temporal, so its run checks first (`check_tenant_quota`) and, refused, ends failed
with stop reason `budget` and the sentence as its error. A running run learns from each
model call's result (`LlmStepResult.over_quota`, the LLM activity's answer) that its tenant
or requester reached a quota: it finishes that step's tool round and stops with `budget`.
Both decide on what an activity recorded, so they replay; both are patched, so runs that
began before them replay unchanged.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import TenantQuotas
    from keel.workflows.run.models import RunInput
    from keel.workflows.run.step_models import LlmStepResult
    from keel.workflows.usage.quota_models import QuotaCheckInput

__all__ = ["QUOTA_SCHEDULE_PATCH", "QUOTA_STOP_PATCH", "schedule_refusal", "stop_after"]

QUOTA_SCHEDULE_PATCH = "tenant-quota-schedule"
QUOTA_STOP_PATCH = "tenant-quota-stop"


async def schedule_refusal(run: RunInput) -> str | None:
    """The sentence that refuses a scheduled run whose tenant is over a quota; else None."""
    if run.trigger != "schedule" or not workflow.patched(QUOTA_SCHEDULE_PATCH):
        return None
    check = await run_activity(
        TenantQuotas.check_tenant_quota,
        QuotaCheckInput(
            run_id=run.run_id,
            tenant_id=run.tenant_id,
            requester=run.requester,
            schedule_id=run.schedule_id,
        ),
        timeouts.STORE_CALL,
        local=True,
    )
    return None if check.allowed else check.reason


def stop_after(result: LlmStepResult) -> str | None:
    """The quota the step's model call reached, if the run must stop after this step."""
    if result.over_quota is None or not workflow.patched(QUOTA_STOP_PATCH):
        return None
    return result.over_quota
