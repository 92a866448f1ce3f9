"""Reads of a run a caller was already allowed, by its key: what A2A's tasks are made of.

A task is answered from its run's record and interactions, re-read while the task is
followed; the caller's access was checked when the run was first looked up
(`RunService.get`), and these reads only take the key that lookup returned.
"""

from __future__ import annotations

from keel.activities.store.records import RunRecord
from keel.api.core.context import CoreParts
from keel.api.core.errors import NotFound
from keel.api.core.run_tree import subtree, tree_usage
from keel.api.core.tenant_ids import in_view
from keel.workflows.interactions.models import Interaction
from keel.workflows.usage.models import TreeUsage

__all__ = ["TaskReads"]


class TaskReads:
    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts

    async def reload(self, key: str) -> RunRecord:
        """The run stored under `key` now (`RunRecord.id` of a run already looked up)."""
        run = await self._parts.store.get_run(key)
        if run is None:
            raise NotFound(f"Run {key} is gone.")
        return run

    async def interactions(self, run: RunRecord) -> list[Interaction]:
        """Every interaction of the run, pending or decided, in the order they were asked."""
        return await self._parts.interactions.for_run(run.id)

    async def usage(self, run: RunRecord) -> TreeUsage | None:
        """The tokens and cost of the run and its sub-agent runs, from their recorded calls."""
        return await tree_usage(self._parts.store, run)

    async def decided_by(self, run: RunRecord, decision_id: str) -> str | None:
        """The interaction of the run's tree (its sub-agents' too) that the decision
        `decision_id` took, as the tenant knows its id; None if it took none."""
        for record in await subtree(self._parts.store, run):
            for interaction in await self._parts.interactions.for_run(record.id):
                if interaction.decision_id == decision_id:
                    return in_view(run.tenant_id, interaction.id)
        return None
