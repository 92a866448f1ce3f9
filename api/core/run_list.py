"""The run list as users read it: the runs they started, each with its sub-agent count.

A review can start a dozen or more sub-agent runs; listed among the top-level runs they
bury the run the user started. So a list shows top-level runs unless asked for children
(`children="include"`), or lists the direct children of one run (`parent`), which must
be the caller's: another tenant's parent answers 404, audited, like a read of that run.
Paging is by `(created_at, id)` within the same filters, so cursors stay correct.

A live run that waits on a person (it, or a sub-agent run below it, has a pending
approval or question) is listed as `waiting`, not `running`; `status="waiting"` lists
those, `status="running"` the others.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from keel.activities.store.records import RunRecord
from keel.activities.store.run_tree import RunTreeStore
from keel.api.core.context import CoreParts
from keel.api.core.runs import RunService
from keel.api.identity.auth import Principal
from keel.workflows.usage.models import TreeUsage

ChildScope = Literal["exclude", "include"]
"""`exclude`: top-level runs only (the default); `include`: sub-agent runs too."""


class RunListPage(BaseModel):
    """One page of runs, newest first, with how many children each started directly."""

    runs: list[RunRecord]
    child_counts: dict[str, int]
    waiting: set[str] = set()
    """The runs of the page that wait on a person now."""
    tree_usage: dict[str, TreeUsage] = {}
    """Each run's usage with its sub-agent runs' (`RunTreeStore.tree_usage`)."""

    def status_of(self, run: RunRecord) -> str:
        """The run's status as a list shows it: `waiting` while it waits on a person."""
        return "waiting" if run.id in self.waiting else run.status


class RunListing:
    """Pages of runs for run lists (REST, the console, the CLI, MCP's list_runs and
    resources/list)."""

    def __init__(self, parts: CoreParts, runs: RunService) -> None:
        self._tree = RunTreeStore(parts.store.pool)
        self._runs = runs

    async def page(
        self,
        user: Principal,
        *,
        limit: int,
        before: tuple[datetime, str] | None,
        children: ChildScope = "exclude",
        parent: str | None = None,
        status: str | None = None,
        agent: str | None = None,
        trigger: str | None = None,
        schedule_id: str | None = None,
    ) -> RunListPage:
        """The page a run list asks for; see the module docstring for the child filters."""
        parent_key = None
        if parent is not None:
            parent_key = (await self._runs.get(parent, user, allow_admin=False)).id
        # Asking for the runs a parent started is asking for children.
        top_level = children == "exclude" and parent_key is None and trigger != "parent"
        waiting = {"waiting": True, "running": False}.get(status or "")
        found = await self._runs.page(
            user,
            limit=limit,
            before=before,
            status="running" if status == "waiting" else status,
            waiting=waiting,
            agent=agent,
            trigger=trigger,
            schedule_id=schedule_id,
            parent_run_id=parent_key,
            top_level=top_level,
        )
        ids = [r.id for r in found]
        counts = await self._tree.child_counts(user.tenant_id, ids)
        return RunListPage(
            runs=found,
            child_counts=counts,
            waiting=await self._tree.waiting(user.tenant_id, ids),
            tree_usage=await self._tree.tree_usage(user.tenant_id, ids),
        )

    async def tree_usage(self, user: Principal, runs: list[RunRecord]) -> dict[str, TreeUsage]:
        """Each run's usage with its sub-agent runs', for a list of runs the caller read."""
        return await self._tree.tree_usage(user.tenant_id, [r.id for r in runs])
