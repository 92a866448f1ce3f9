"""Payloads of the retention sweep: one model in and one out per workflow and activity."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

__all__ = ["PurgeBatchInput", "PurgeBatchResult", "RetentionSweep", "RetentionSweepResult"]


class RetentionSweep(BaseModel):
    """Input of `RetentionWorkflow`; a continued sweep carries its totals."""

    batch_size: int = Field(default=200, description="Runs emptied per tenant per batch.")
    runs_purged: int = Field(default=0, description="Runs emptied by this sweep so far.")
    started_at: datetime | None = Field(
        default=None, description="The sweep's clock: cutoffs are measured from it."
    )


class PurgeBatchInput(BaseModel):
    """Input of `purge_expired_runs`: one batch per tenant with a policy."""

    now: datetime
    batch_size: int


class PurgeBatchResult(BaseModel):
    """Output of `purge_expired_runs`: how much went, and whether anything is left."""

    runs: int = 0
    texts: int = 0
    tenants: list[str] = Field(default_factory=list, description="Tenants it removed from.")
    more: bool = Field(default=False, description="Some tenant filled its batch: go again.")


class RetentionSweepResult(BaseModel):
    """Output of `RetentionWorkflow`."""

    runs_purged: int
    batches: int
