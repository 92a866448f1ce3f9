"""The context budget's I/O: windows learnt and loaded, requests planned, compactions."""

from activities.context.budget import ContextBudget, ContextLengthExceeded, exceeded_limit
from activities.context.compaction import COMPACTION_PROMPT, CompactionActivities

__all__ = [
    "COMPACTION_PROMPT",
    "CompactionActivities",
    "ContextBudget",
    "ContextLengthExceeded",
    "exceeded_limit",
]
