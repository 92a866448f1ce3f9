"""The tenant of what no tenant can be known for: `_orphan`.

A refused token names no tenant anyone has verified (its claims are whatever the
sender wrote), yet what it tried must be kept. Such audit rows go under this explicit
marker, in a hash chain of their own, rather than being dropped or filed under a tenant
the sender merely claimed (which would let anyone write into, or flood, another tenant's
log). Only admins read the audit log, so the marker is readable by admins alone, and no
token may name it as its tenant: the verifier and the token exchange refuse it.
"""

from __future__ import annotations

__all__ = ["ORPHAN_TENANT", "is_reserved_tenant"]

ORPHAN_TENANT = "_orphan"


def is_reserved_tenant(tenant_id: str) -> bool:
    """Whether a tenant id is Keel's own marker, which no caller may act as."""
    return tenant_id == ORPHAN_TENANT
