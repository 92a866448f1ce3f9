"""A scheduled run's quota check as it fires, and the LLM activity's after each call.

A schedule fires through Temporal, not the API, so the service's check before a run
starts (`api.core.quotas`) cannot see it; a scheduled run's first act is this check
instead, and a refusal ends the run failed with the sentence as its error (audited once
per run, as the API audits its refusals). A running run's LLM activity asks
`QuotaWatch.over` after recording its call: the answer travels in the step's result, so
the workflow decides on the recorded figure when it replays.
"""

from __future__ import annotations

from temporalio import activity

from keel.activities.quotas.ledger import QuotaLedger
from keel.activities.store.audit import AuditEntry, AuditLog
from keel.workflows.activity_refs import TenantQuotas
from keel.workflows.usage.quota_models import QuotaCheck, QuotaCheckInput

__all__ = ["QuotaActivities", "QuotaWatch"]

# Runs whose requester a worker remembers for the per-user quotas; past it, afresh.
MAX_KNOWN_RUNS = 10_000


class QuotaActivities(TenantQuotas):
    def __init__(self, ledger: QuotaLedger, audit: AuditLog) -> None:
        self._ledger = ledger
        self._audit = audit

    @activity.defn(name="check_tenant_quota")
    async def check_tenant_quota(self, request: QuotaCheckInput) -> QuotaCheck:
        subject = request.requester.removeprefix("user:")
        refusal = await self._ledger.refusal(request.tenant_id, subject)
        if refusal is None:
            return QuotaCheck(allowed=True)
        await self._audit.append_once(
            AuditEntry(
                tenant_id=request.tenant_id,
                actor=subject,
                category="usage",
                action="quota.refused",
                severity="warning",
                subject=request.run_id,  # one entry per refused run
                detail={
                    "via": "schedule",
                    "schedule_id": request.schedule_id,
                    **refusal.line.model_dump(mode="json"),
                },
            )
        )
        return QuotaCheck(allowed=False, reason=refusal.message)


class QuotaWatch:
    """After a model call: is the run's tenant (or requester) over a quota now?"""

    def __init__(self, ledger: QuotaLedger) -> None:
        self._ledger = ledger
        self._requesters: dict[str, str] = {}

    async def over(self, run_id: str, tenant_id: str) -> str | None:
        """The sentence naming the quota the run's tenant or requester has reached, if any.

        A tenant without quotas costs a look into the ledger's cache and nothing more."""
        quotas = await self._ledger.quotas(tenant_id)
        if not quotas:
            return None
        subject = ""
        if any(q.user_id is not None for q in quotas):
            subject = await self._requester(run_id)
        refusal = await self._ledger.refusal(tenant_id, subject)
        return None if refusal is None else refusal.message

    async def _requester(self, run_id: str) -> str:
        known = self._requesters.get(run_id)
        if known is None:
            known = (await self._ledger.store.requester(run_id) or "").removeprefix("user:")
            if len(self._requesters) >= MAX_KNOWN_RUNS:
                self._requesters.clear()
            self._requesters[run_id] = known
        return known
