"""How a run shows in Temporal's UI and visibility API: search attributes and a memo.

Runs can be listed and filtered by agent, tenant, trigger and schedule
(`KeelAgent = "review" AND KeelTenant = "acme"`); the memo names the requester.
The attributes must be registered on the namespace first: the embedded server does
it at start (`worker.dev_stack`), a cluster with `keel setup temporal`
(`worker.cluster_check`, which the API and worker also check at start).
Every start of an agent run (API, schedules, sessions) uses these two functions.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from keel.workflows.run.models import RunInput

__all__ = ["SEARCH_ATTRIBUTES", "run_memo", "run_search_attributes"]

KEEL_AGENT = SearchAttributeKey.for_keyword("KeelAgent")
KEEL_TENANT = SearchAttributeKey.for_keyword("KeelTenant")
KEEL_TRIGGER = SearchAttributeKey.for_keyword("KeelTrigger")
KEEL_SCHEDULE = SearchAttributeKey.for_keyword("KeelSchedule")

SEARCH_ATTRIBUTES = (KEEL_AGENT, KEEL_TENANT, KEEL_TRIGGER, KEEL_SCHEDULE)
"""Registered with the namespace, all of type Keyword."""


def run_search_attributes(
    run: RunInput, *, schedule_id: str | None = None
) -> TypedSearchAttributes:
    pairs = [
        SearchAttributePair(KEEL_AGENT, run.agent.name),
        SearchAttributePair(KEEL_TENANT, run.tenant_id),
        SearchAttributePair(KEEL_TRIGGER, run.trigger),
    ]
    schedule = schedule_id or run.schedule_id
    if schedule:
        pairs.append(SearchAttributePair(KEEL_SCHEDULE, schedule))
    return TypedSearchAttributes(pairs)


def run_memo(run: RunInput) -> dict[str, str]:
    return {"requester": run.requester}
