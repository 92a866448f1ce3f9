"""Usage as clients see it: a run's, a run tree's and a tenant's tokens and cost."""

from __future__ import annotations

from pydantic import BaseModel, Field

from keel.activities.store.records import RunRecord
from keel.workflows.usage.models import TreeUsage


class UsagePublic(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float = Field(default=0.0, description="From the price table in settings.")
    runs: int = Field(default=1, description="How many runs these figures add up.")


def tree_usage_public(tree: TreeUsage | None) -> UsagePublic | None:
    """A tree's usage as clients see it; None when it is unknown."""
    if tree is None:
        return None
    return UsagePublic(
        prompt_tokens=tree.prompt_tokens,
        completion_tokens=tree.completion_tokens,
        total_tokens=tree.total_tokens,
        cost_usd=tree.cost_usd,
        runs=tree.runs,
    )


def usage_of(run: RunRecord) -> UsagePublic:
    return UsagePublic(
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        total_tokens=run.prompt_tokens + run.completion_tokens,
        cost_usd=float(run.cost_usd),
    )


class TenantUsage(BaseModel):
    """What one tenant has used."""

    tenant_id: str
    runs: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
