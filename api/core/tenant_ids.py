"""Ids per tenant: another tenant's run, session or schedule id is simply unknown.

A client may choose the id of a run, a session or a schedule. Ids stay what they are
wherever nobody else holds them: the workflow id, the schedule id and every store key
are the id the client chose. When another tenant already holds it, the caller's one
is kept under its *scoped key* `TENANT~ID` instead (`~` is never in a chosen id, so a
scoped key cannot collide with one), and every answer shows it as `ID` again. So a
tenant that chooses an id another tenant holds gets a run, session or schedule of its
own with exactly that id, as if the other did not exist: no 409 "taken", no
"belongs to someone else".

Reading resolves an id for the caller's tenant: its scoped key first, then the id as
it is (whose owner is checked, as before: another tenant's answers 404 and is
audited). Ids derived from a scoped key (a sub-agent's `KEY-task-2-0`, its interaction
`KEY-task-2-0:ia-1-1`, a scheduled run `KEY-2026-...`) carry the scope along and are
shown without it too. Runs recorded before this keep their ids and stay readable.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError

from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref
from keel.workflows.tenant_keys import SCOPE, in_view, in_view_data, scoped

if TYPE_CHECKING:
    from keel.activities.store.records import RunRecord
    from keel.activities.store.session_store import SessionRecord
    from keel.api.core.context import CoreParts

__all__ = ["SCOPE", "TenantIds", "in_view", "in_view_data", "interaction_key", "scoped"]

# A run's workflow records it with its first activity: well within a second or two.
STARTING_RUN_DESCRIBE = timedelta(seconds=3)
STARTING_RUN_POLLS = 40
STARTING_RUN_POLL_S = 0.05


def interaction_key(run: RunRecord, given: str) -> str:
    """The key of an interaction a caller names on `run`: a sub-agent's (`CHILD:ia-...`)
    names the child as the caller knows it, and the children of a run kept under a
    scoped key are kept under scoped keys too."""
    owner, sep, rest = given.rpartition(":")
    tenant = run.tenant_id
    if not sep or in_view(tenant, run.id) == run.id or owner.startswith(f"{tenant}{SCOPE}"):
        return given
    return f"{scoped(tenant, owner)}:{rest}"


class TenantIds:
    """Which run or session a caller's id names in its tenant, and the key a new one gets."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts

    async def run(self, given: str, user: Principal) -> RunRecord | None:
        """The run `given` names for the caller: its scoped key's, else the id's own (of
        whichever tenant; the caller checks the owner)."""
        store = self._parts.store
        return await store.get_run(scoped(user.tenant_id, given)) or await store.get_run(given)

    async def starting_run(self, given: str, user: Principal) -> RunRecord | bool | None:
        """When `given` names another tenant's run: the caller's own run of that id, if
        its workflow exists under the caller's scoped key but its record is a moment
        behind (a schedule of the same id fired in the same second for both tenants).
        Its record once written (waited for a little), True if it is still not written,
        None if the caller has no such run (then it is a cross-tenant read)."""
        key = scoped(user.tenant_id, given)
        try:
            await self._parts.temporal.get_workflow_handle(key).describe(
                rpc_timeout=STARTING_RUN_DESCRIBE
            )
        except RPCError:
            return None
        for _ in range(STARTING_RUN_POLLS):
            record = await self._parts.store.get_run(key)
            if record is not None:
                return record
            await asyncio.sleep(STARTING_RUN_POLL_S)
        return True

    async def run_key(self, chosen: str, user: Principal) -> str:
        """The key for a run the caller names `chosen`: the id, unless another tenant
        holds it (or the caller's run is already under the scoped key)."""
        held = await self.run(chosen, user)
        if held is not None and held.tenant_id == user.tenant_id:
            return held.id
        return chosen if held is None else scoped(user.tenant_id, chosen)

    async def session(self, given: str, user: Principal) -> SessionRecord | None:
        sessions = self._parts.sessions
        return await sessions.get(scoped(user.tenant_id, given)) or await sessions.get(given)

    async def open_session(self, chosen: str, user: Principal, **fields: Any) -> SessionRecord:
        """The caller's session `chosen`, created with `fields` if it has none by that id:
        under the id, or its scoped key when another tenant holds the id."""
        held = await self.session(chosen, user)
        if held is not None and held.tenant_id == user.tenant_id:
            return held
        for key in (
            (chosen, scoped(user.tenant_id, chosen))
            if held is None
            else (scoped(user.tenant_id, chosen),)
        ):
            session = await self._parts.sessions.create(
                session_id=key, tenant_id=user.tenant_id, created_by=user_ref(user), **fields
            )
            if session.tenant_id == user.tenant_id:
                return session
        raise AssertionError("unreachable: the scoped key is the caller tenant's alone")
