"""Grants as clients choose, see and revoke them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from keel.activities.store.grant_store import GrantRecord
from keel.api.core.schemas.common import StoredText
from keel.api.core.tenant_ids import in_view
from keel.workflows.gate.grants import MAX_PATTERN_CHARS, GrantScope

__all__ = ["GrantList", "GrantPublic", "GrantScopeCreate"]


class GrantScopeCreate(BaseModel):
    """How far an `approve_always` reaches (the approver picks)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["call", "run", "session", "agent"] = Field(
        description="`call`: this call only (like `approve`); `run`, `session`: this tool "
        "for the rest of the run or the session; `agent`: this tool in every run of this "
        "agent for the run's user (the user themselves or an admin may grant it)."
    )
    pattern: StoredText | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PATTERN_CHARS,
        description="Glob over the tool's subject (path, command line, URL); it must cover "
        "this call's subject and nothing a deny rule denies. Default: exactly this subject.",
    )
    until: datetime | None = Field(
        default=None, description="When the grant ends (with a time zone, in the future)."
    )

    def scope(self) -> GrantScope:
        return GrantScope(kind=self.kind, pattern=self.pattern, until=self.until)


class GrantPublic(BaseModel):
    """A stored grant: an `allow` rule that lasts, with who granted it."""

    id: str
    kind: str = Field(description="run, session or agent.")
    permission: str = Field(description="The tool the grant allows.")
    pattern: str = Field(description="Glob over the tool's subject.")
    run_id: str = Field(description="The run whose approval made it (the one it covers if `run`).")
    session_id: str | None = Field(description="The session it covers if `session`.")
    agent: str = Field(description="The agent whose runs it covers if `agent`.")
    user: str = Field(description="Whose runs it covers if `agent`: the run's requester.")
    interaction_id: str
    granted_by: str
    created_at: datetime
    until: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None
    status: Literal["active", "expired", "revoked"]

    @classmethod
    def of(cls, grant: GrantRecord, now: datetime) -> GrantPublic:
        """The grant as its tenant knows its run, session and interaction ids."""
        tenant = grant.tenant_id
        status: Literal["active", "expired", "revoked"] = "active"
        if grant.revoked_at is not None:
            status = "revoked"
        elif grant.until is not None and grant.until <= now:
            status = "expired"
        return cls(
            id=grant.id,
            kind=grant.kind,
            permission=grant.permission,
            pattern=grant.pattern,
            run_id=in_view(tenant, grant.run_id),
            session_id=in_view(tenant, grant.session_id) if grant.session_id else None,
            agent=grant.agent,
            user=grant.user_ref,
            interaction_id=in_view(tenant, grant.interaction_id),
            granted_by=grant.granted_by,
            created_at=grant.created_at,
            until=grant.until,
            revoked_at=grant.revoked_at,
            revoked_by=grant.revoked_by,
            status=status,
        )


class GrantList(BaseModel):
    """The tenant's grants, newest first."""

    grants: list[GrantPublic]
