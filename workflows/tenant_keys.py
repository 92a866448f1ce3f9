"""Ids per tenant, the pure part: the scoped key a tenant's id is kept under when another
tenant holds the id, and how an id is shown to its tenant. `api.core.tenant_ids` says
why and does the lookups; the webhook delivery shows ids the same way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SCOPE", "in_view", "in_view_data", "scoped"]

SCOPE = "~"
"""Between the tenant and the id in a scoped key; no chosen id contains it."""


def scoped(tenant_id: str, chosen: str) -> str:
    """The key a tenant's `chosen` id is kept under when another tenant holds it."""
    return f"{tenant_id}{SCOPE}{chosen}"


def in_view(tenant_id: str, key: str) -> str:
    """The id as the tenant that owns `key` knows it: without the scope, if it has one."""
    return key.removeprefix(f"{tenant_id}{SCOPE}")


def in_view_data(tenant_id: str, data: Any) -> Any:
    """`data` (an event's, say) with each scoped key of the tenant shown as its id."""
    prefix = f"{tenant_id}{SCOPE}"
    if isinstance(data, str):
        return data.removeprefix(prefix)
    if isinstance(data, dict):
        return {k: in_view_data(tenant_id, v) for k, v in data.items()}
    if isinstance(data, list):
        return [in_view_data(tenant_id, v) for v in data]
    return data
