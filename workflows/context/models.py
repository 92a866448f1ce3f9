"""Compaction payloads: when a conversation must shrink, and what it became."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CompactionNeed(BaseModel):
    """`llm_step` did not call the model: the conversation must be compacted first."""

    level: int = Field(description="0: summarise all but the newest step; higher: harder.")
    estimate: int = Field(description="Estimated tokens of the request that did not fit.")
    window: int = Field(description="The context window it was measured against.")
    refused: bool = Field(default=False, description="The provider refused it as too long.")


class CompactionInput(BaseModel):
    """Input of `compact_context`: summarise a run's conversation before `step`."""

    run_id: str
    session_id: str | None = None
    step: int
    model: str
    tools: list[str] = Field(default_factory=list, description="Offered to the next call.")
    need: CompactionNeed
    event_seq: int
    context_window: int | None = None


class CompactionResult(BaseModel):
    """Output of `compact_context`: the figures; the summary itself is in Postgres."""

    through_step: int
    tokens_before: int
    tokens_after: int
    tokens: list[int] = Field(default_factory=list, description="[prompt, completion] spent.")
    cost_usd: float = Field(
        default=0.0,
        description="What the summarising call cost by the worker's price table, so the "
        "run's usage and its cost ceiling count it as they count a step's call.",
    )
