"""The payloads of a tenant-quota check: a scheduled run's, as it fires."""

from __future__ import annotations

from pydantic import BaseModel, Field


class QuotaCheckInput(BaseModel):
    """Input of `check_tenant_quota`: may this run of the tenant (and requester) start?"""

    run_id: str
    tenant_id: str
    requester: str
    schedule_id: str | None = None


class QuotaCheck(BaseModel):
    """Output of `check_tenant_quota`; `reason` is the refusal sentence when over quota."""

    allowed: bool
    reason: str = Field(default="", description="Which quota is reached and when it resets.")
