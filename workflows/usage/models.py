"""Usage of model calls: one run's tokens and cost, and a run tree's as recorded."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Usage(BaseModel):
    """Tokens and cost of one or more LLM calls, as the workflow counts them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = Field(
        default=0.0, description="By the worker's price table; 0 for a model it has no price for."
    )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def plus(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class TreeUsage(BaseModel):
    """Tokens and cost of a run and every sub-agent run below it: the sum of the model
    calls recorded for the tree (each run's own `prompt_tokens`, `completion_tokens`
    and `cost_usd`), summed by one query (`activities/store/run_tree.py`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    runs: int = Field(default=1, description="How many runs the tree holds, the run included.")
