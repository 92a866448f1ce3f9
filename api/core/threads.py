"""Threads: a session as chat front ends hold it, with the run that waits on them.

LangGraph's API and AG-UI both speak of threads, interrupts and resumes; both are
surfaces over this one service, side by side. A thread is a session (created on
first use, with the agent and workspace the request names); an interrupt is a
pending interaction of the thread's running run; a resume decides interactions
through `DecisionService`, checked and audited as every other surface's decisions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from keel.activities.store.records import RunRecord
from keel.activities.store.session_store import SessionRecord
from keel.api.core.context import CoreParts
from keel.api.core.decisions import DecisionService
from keel.api.core.errors import Conflict, NotFound, invalid_request
from keel.api.core.resume_values import decisions_for
from keel.api.core.runs import RunService
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.core.schemas.sessions import SessionCreate
from keel.api.core.sessions import SessionService
from keel.api.core.tenant_ids import in_view
from keel.api.identity.auth import Principal

__all__ = ["ThreadRun", "ThreadService", "metadata_text"]


@dataclass(frozen=True)
class ThreadRun:
    """The run a thread's request created or resumed, and where its stream picks up."""

    record: RunRecord
    thread_id: str | None
    resumed: frozenset[str] = field(default_factory=frozenset)
    """Interactions this request decided: the stream starts after them."""

    @property
    def run_id(self) -> str:
        """The run's id as the caller knows it (the record holds its key)."""
        return in_view(self.record.tenant_id, self.record.id)


class ThreadService:
    def __init__(
        self,
        parts: CoreParts,
        sessions: SessionService,
        runs: RunService,
        decisions: DecisionService,
    ) -> None:
        self._default_agent = parts.settings.a2a_default_agent
        self._sessions = sessions
        self._runs = runs
        self._decisions = decisions

    async def session(
        self, thread_id: str, metadata: dict[str, Any], user: Principal
    ) -> SessionRecord:
        """The thread's session, created (with `metadata`'s agent and workspace) if new."""
        try:
            return await self._sessions.get(thread_id, user)
        except NotFound:
            return await self.new_session(thread_id, metadata, user)

    async def new_session(
        self, thread_id: str, metadata: dict[str, Any], user: Principal
    ) -> SessionRecord:
        """A session for the thread: agent `graph_id` or `assistant_id` (else the default
        agent), workspace `workspace` (else the root); the metadata kept as text."""
        agent = str(metadata.get("graph_id") or metadata.get("assistant_id") or self._default_agent)
        try:
            body = SessionCreate(
                agent=agent,
                workspace=str(metadata.get("workspace") or "."),
                session_id=thread_id,
                metadata={str(k): metadata_text(v) for k, v in metadata.items()},
            )
        except ValidationError as exc:
            raise invalid_request(exc) from exc
        return await self._sessions.create(body, user)

    async def resume(self, session: SessionRecord, value: Any, user: Principal) -> ThreadRun:
        """Decide what the thread's run waits on (`decisions_for` reads the value); the
        same durable run goes on, and its stream starts after the decided interactions."""
        record, pending, thread_id = None, [], in_view(session.tenant_id, session.id)
        for candidate in await self._runs.page(
            user, limit=20, session_id=session.id, statuses=["running"]
        ):
            pending = await self.waiting(candidate)
            if pending:
                record = candidate
                break
        if record is None:
            raise Conflict(
                f"Thread {thread_id} has no interrupt waiting; send input to start a new run."
            )
        decided = []
        shown = in_view(record.tenant_id, record.id)
        for ia, decision in decisions_for(value, pending):
            await self._decisions.decide(ia.run_id, ia.id, decision, user)
            if ia.run_id == shown:
                decided.append(ia.id)
        return ThreadRun(record=record, thread_id=thread_id, resumed=frozenset(decided))

    async def waiting(self, record: RunRecord | None) -> list[InteractionPublic]:
        """What the run waits on now (its interrupts); nothing without a run."""
        if record is None:
            return []
        return await self._runs.pending(record)

    async def waiting_of(self, run_id: str, user: Principal) -> list[InteractionPublic]:
        """What the caller's run waits on now; nothing once it has ended (its
        interactions end with it)."""
        return await self.waiting(await self._runs.get(run_id, user))


def metadata_text(value: Any) -> str:
    """A metadata value as Keel stores metadata: text (JSON for anything else)."""
    return value if isinstance(value, str) else json.dumps(value)
