"""A run's sub-agent runs, as its readers see them: the tree, and what the tree waits on.

A parent answers for its children: its run view shows them with rolled-up usage, its
interaction list holds theirs, and a decision sent to it for a child's interaction is
the child's decision, taken with exactly the checks of the child's own endpoint.
"""

from __future__ import annotations

from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.records import RunRecord
from keel.activities.store.run_store import Store
from keel.activities.store.run_tree import RunTreeStore
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.core.schemas.runs import RunChildPublic, RunPublic
from keel.api.core.schemas.usage import tree_usage_public
from keel.workflows.usage.models import TreeUsage


async def subtree(store: Store, run: RunRecord) -> list[RunRecord]:
    """The run, then every run below it (in its tenant)."""
    return await RunTreeStore(store.pool).subtree(run.tenant_id, run.id)


async def tree_usage(store: Store, run: RunRecord) -> TreeUsage | None:
    """The usage of the run and every run below it, from their recorded model calls."""
    return (await RunTreeStore(store.pool).tree_usage(run.tenant_id, [run.id])).get(run.id)


def with_tree(public: RunPublic, records: list[RunRecord], total: TreeUsage | None) -> RunPublic:
    """The run view with its children nested and the usage of the whole tree."""
    nodes = {r.id: RunChildPublic.from_record(r) for r in records[1:]}
    for record in records[1:]:
        parent = nodes.get(record.parent_run_id or "")
        if parent is not None:
            parent.children.append(nodes[record.id])
    public.children = [nodes[r.id] for r in records[1:] if r.parent_run_id == records[0].id]
    public.child_count = len(public.children)
    public.total_usage = tree_usage_public(total)
    return public


async def tree_interactions(
    store: Store, interactions: InteractionStore, run: RunRecord
) -> list[InteractionPublic]:
    """The run's interactions, then its sub-agents', each naming the run it belongs to."""
    found: list[InteractionPublic] = []
    for record in await subtree(store, run):
        found += [
            InteractionPublic.from_interaction(record.id, ia, tenant_id=record.tenant_id)
            for ia in await interactions.for_run(record.id)
        ]
    return found


async def child_owning(store: Store, run: RunRecord, interaction_id: str) -> str | None:
    """The sub-agent run below `run` whose interaction this is, if it is one.

    A sub-agent's interaction ids start with its run id (`RUN:ia-STEP-ORD`), so they
    stay unique among all of the tree's.
    """
    owner, sep, _ = interaction_id.rpartition(":")
    if not sep or owner == run.id:
        return None
    below = {r.id for r in (await subtree(store, run))[1:]}
    return owner if owner in below else None
