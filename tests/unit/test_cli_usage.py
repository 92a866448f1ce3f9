"""The CLI's usage figures: what the run cost with its sub-agents, its own beside it."""

from __future__ import annotations

from keel.api.cli.progress import usage_text
from keel.api.core.schemas.usage import UsagePublic


def test_usage_reads_as_the_trees_with_the_runs_own_beside_it() -> None:
    alone = UsagePublic(prompt_tokens=90, completion_tokens=10, total_tokens=100, runs=1)
    assert usage_text(100, alone) == "100 tokens"
    assert usage_text(100, None, 0.5) == "100 tokens · $0.5000"
    tree = UsagePublic(
        prompt_tokens=700, completion_tokens=140, total_tokens=840, cost_usd=0.25, runs=3
    )
    assert usage_text(360, tree) == "840 tokens · $0.2500 with 2 sub-agent runs (360 this run)"
