"""The context budget's I/O: windows learnt and loaded, requests planned, compactions."""

from keel.activities.context.budget import ContextBudget, ContextLengthExceeded, exceeded_limit
from keel.activities.context.compaction import COMPACTION_PROMPT, CompactionActivities

__all__ = [
    "COMPACTION_PROMPT",
    "CompactionActivities",
    "ContextBudget",
    "ContextLengthExceeded",
    "exceeded_limit",
]
