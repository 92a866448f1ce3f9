"""Which directories a tenant's runs may work in: the one rule the API (when a run, a
session or a schedule names a workspace) and the worker (when a tool runs) both apply.

`shared` (the default): every tenant's workspaces lie anywhere under the root, as for
one user or one team. `per-tenant`: tenant T's lie under `root/T`, so a path naming
another tenant's directory is not found. A tenant id that cannot name one directory
(a slash, a leading dot, a control character) has no workspaces in that mode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Tenancy", "WorkspaceRoots", "tenant_dir"]

Tenancy = Literal["shared", "per-tenant"]

_DIR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=-]{0,127}")


def tenant_dir(tenant_id: str) -> str | None:
    """The directory name of the tenant's workspaces, or None if its id cannot be one."""
    return tenant_id if _DIR_NAME.fullmatch(tenant_id) else None


@dataclass(frozen=True)
class WorkspaceRoots:
    """Where each tenant's workspaces lie under the one configured root."""

    root: Path
    tenancy: Tenancy = "shared"

    @property
    def per_tenant(self) -> bool:
        return self.tenancy == "per-tenant"

    def of(self, tenant_id: str) -> Path | None:
        """The directory the tenant's workspaces lie under (resolved); None when its id
        cannot name a directory (per-tenant only)."""
        root = self.root.resolve()
        if not self.per_tenant:
            return root
        name = tenant_dir(tenant_id)
        return root / name if name is not None else None

    def holds(self, tenant_id: str, path: Path) -> bool:
        """Whether the resolved `path` lies inside the tenant's root."""
        own = self.of(tenant_id)
        return own is not None and path.resolve().is_relative_to(own)

    def owner(self, path: Path) -> str | None:
        """Per-tenant: the tenant whose root holds the resolved `path` (the first directory
        under the root), if any; shared: None."""
        if not self.per_tenant:
            return None
        resolved, root = path.resolve(), self.root.resolve()
        if resolved == root or not resolved.is_relative_to(root):
            return None
        return resolved.relative_to(root).parts[0]
