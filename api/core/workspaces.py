"""The workspace a request names, checked against the caller's tenant's boundary.

Every surface that names a workspace — a run, a session, a schedule, the MCP read tools,
A2A, LangGraph and AG-UI — comes here through the service. Under
`KEEL_WORKSPACE_TENANCY=per-tenant` a tenant's workspaces lie under
`KEEL_WORKSPACE_ROOT/{tenant}` (`activities.tools.workspace_roots`, the rule the worker
applies again when a tool runs): a relative path is taken from there, and a path inside
another tenant's directory is answered as one that does not exist (the same sentence
whether it exists or not) and audited as a cross-tenant refusal. Under `shared` (the
default) every tenant has the whole root, as before.
"""

from __future__ import annotations

from pathlib import Path

from keel.activities.tools.workspace_roots import WorkspaceRoots
from keel.api.core.context import CoreParts
from keel.api.core.errors import Invalid
from keel.api.identity.auth import Principal

__all__ = ["TenantWorkspaces"]


class TenantWorkspaces:
    """Resolve and check the workspaces a caller names."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        settings = parts.settings
        self.roots = WorkspaceRoots(settings.workspace_root, settings.workspace_tenancy)

    async def resolve(self, raw: str, user: Principal) -> Path:
        """The directory `raw` names for the caller: absolute, or relative to the caller's
        root; `Invalid` (field `workspace`) with a sentence when it is not one of theirs."""
        own = self.roots.of(user.tenant_id)
        if own is None:
            raise Invalid(
                f"Tenant {user.tenant_id!r} has no workspaces: with per-tenant workspaces a "
                "tenant id must name one directory (letters, digits and . _ @ + = -, not "
                "starting with a dot or a dash). An operator must give the tenant such an id.",
                field="workspace",
            )
        resolved = _resolved(raw, own)
        if not resolved.is_relative_to(own):
            if not self.roots.per_tenant:
                raise Invalid(
                    f"Workspace {resolved} is outside the allowed root {own}; choose a "
                    "directory inside it or start Keel with KEEL_WORKSPACE_ROOT set.",
                    field="workspace",
                )
            owner = self.roots.owner(resolved)
            if owner is not None and owner != user.tenant_id:
                await self._parts.audit.cross_tenant(user, "workspace", raw)
            raise Invalid(
                f"No workspace {raw} among tenant {user.tenant_id}'s workspaces: each is a "
                f"directory under {own}; name one there (a relative path is taken from it).",
                field="workspace",
            )
        if not _is_dir(resolved):
            raise Invalid(f"Workspace {resolved} is not an existing directory.", field="workspace")
        return resolved


def _resolved(raw: str, own: Path) -> Path:
    """`raw` as a real path: absolute, or taken from `own` (the caller's root)."""
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = own / path
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before 3.13)
        raise Invalid(
            f"Workspace {raw} cannot be resolved ({exc.__class__.__name__}: a symlink loop "
            "or an unreadable path); choose a plain directory inside the root.",
            field="workspace",
        ) from exc


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long for the file system is no directory either
        return False
