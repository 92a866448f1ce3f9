"""Fair shares between tenants: each tenant is a fairness key on Temporal's task queues.

A run's workflow is started with `Priority(fairness_key=<tenant>)`; its activities and
child runs inherit it, so Temporal's matching service dispatches the tasks of a queue in
round robin over tenants instead of first come, first served, and one tenant's backlog
cannot hold up another's run for longer than a round. Fairness keys hold only where the
server has fairness on (`matching.enableFairness`; `docs/operations.md`); elsewhere they
are carried and ignored.
"""

from __future__ import annotations

import hashlib

from temporalio.common import Priority

__all__ = ["MAX_FAIRNESS_KEY_BYTES", "tenant_priority"]

MAX_FAIRNESS_KEY_BYTES = 64
"""Temporal's limit on a fairness key."""


def tenant_priority(tenant_id: str) -> Priority:
    """The priority a tenant's runs start with: the tenant as fairness key (a longer id by
    a digest of it, so two long ids never share a key)."""
    key = tenant_id
    if len(key.encode()) > MAX_FAIRNESS_KEY_BYTES:
        key = "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:48]
    return Priority(fairness_key=key)
