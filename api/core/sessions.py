"""Sessions: conversations with an agent, one active run at a time."""

from __future__ import annotations

import uuid
from datetime import datetime

from temporalio.service import RPCError

from keel.activities.store.session_store import SessionRecord
from keel.api.core.context import CoreParts
from keel.api.core.errors import NotFound, known_id
from keel.api.core.run_orders import RunOrder, StartedRun, session_workflow_id
from keel.api.core.runs import RunService
from keel.api.core.schemas.sessions import SessionCreate, SessionMessage, SessionMessageCreate
from keel.api.core.temporal_errors import temporal_refusals
from keel.api.core.tenant_ids import in_view
from keel.api.identity.auth import Principal
from keel.workflows.sessions.models import SessionState
from keel.workflows.sessions.workflow import SessionWorkflow


@temporal_refusals("serve the session")
class SessionService:
    """Create, read and talk to sessions, within the caller's tenant."""

    def __init__(self, parts: CoreParts, runs: RunService) -> None:
        self._parts = parts
        self._runs = runs

    async def create(self, body: SessionCreate, user: Principal) -> SessionRecord:
        agent = await self._runs.usable_agent(body.agent, user, via="session")
        workspace = await self._runs.workspace(body.workspace, user)
        session_id = body.session_id or f"ses-{uuid.uuid4().hex[:16]}"
        # Another tenant's session by that id is not this tenant's business: it gets its own.
        return await self._runs.ids.open_session(
            session_id,
            user,
            agent=agent.name,
            workspace=str(workspace),
            model=body.model,
            approver=body.approver,
            metadata=body.metadata,
        )

    async def get(self, session_id: str, user: Principal) -> SessionRecord:
        """The session, if the caller's tenant owns it; 404 otherwise, audited."""
        session = await self._runs.ids.session(known_id(session_id, "session"), user)
        if session is None:
            raise NotFound(f"No session {session_id}.")
        if session.tenant_id != user.tenant_id:
            await self._parts.audit.cross_tenant(user, "session", session_id)
            raise NotFound(f"No session {session_id}.")
        return session

    async def page(
        self, user: Principal, *, limit: int, before: tuple[datetime, str] | None
    ) -> list[SessionRecord]:
        return await self._parts.sessions.page(tenant_id=user.tenant_id, limit=limit, before=before)

    async def history(
        self, session_id: str, user: Principal
    ) -> tuple[SessionRecord, list[SessionMessage], str | None, list[str]]:
        """The session, its turns, its active run and its queue."""
        session = await self.get(session_id, user)
        tenant = session.tenant_id
        messages: list[SessionMessage] = []
        for run in await self._parts.sessions.runs(session.id):
            messages.append(
                SessionMessage(
                    role="user",
                    content=run.input,
                    run_id=in_view(tenant, run.id),
                    run_status=run.status,
                    created_at=run.created_at,
                )
            )
            if run.report:
                messages.append(
                    SessionMessage(
                        role="assistant",
                        content=run.report,
                        run_id=in_view(tenant, run.id),
                        run_status=run.status,
                        created_at=run.finished_at or run.created_at,
                    )
                )
        active, queued = None, []
        try:
            handle = self._parts.temporal.get_workflow_handle_for(
                SessionWorkflow.run, session_workflow_id(session.id)
            )
            state: SessionState = await handle.query(SessionWorkflow.state)
            active = state.active and in_view(tenant, state.active)
            queued = [in_view(tenant, s.run.run_id) for s in state.queue]
        except RPCError:
            pass  # no message posted yet: no session workflow
        return session, messages, active, queued

    async def post_message(
        self, session_id: str, body: SessionMessageCreate, user: Principal
    ) -> StartedRun:
        """Start a run in the session; `on_busy` says what happens if one is active. A
        retry with the same `run_id` and message answers with the run it started."""
        session = await self.get(session_id, user)
        order = RunOrder.of(
            agent=body.agent or session.agent,
            input=body.input,
            workspace=session.workspace,
            trigger="api",
            run_id=body.run_id,
            session_id=session_id,
            on_busy=body.on_busy,
            model=session.model,
            approver=session.approver,
            approval_expires_after_s=body.approval_expires_after_s,
        )
        return await self._runs.start(order, user)
