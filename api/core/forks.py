"""Rewind and fork: a new run from a run's conversation up to one of its steps.

The fork is a new run of the original's agent, model and workspace, started the way
every run starts (`RunService.start`: checks, idempotency on `run_id`, record then
start); its conversation is read from Postgres, never from the original's workflow,
and its seed is written with its row. The original's rows and history are only read.
What a fork does not undo is said in docs/forks.md: files its tools wrote and commands
they ran stay as they are.
"""

from __future__ import annotations

from keel.activities.store.records import MessageRecord, RunRecord
from keel.api.core.context import CoreParts
from keel.api.core.fork_seed import ForkPoint, fork_seed
from keel.api.core.run_orders import OnBusy, RunOrder, StartedRun
from keel.api.core.runs import RunService
from keel.api.core.schemas.forks import ForkCreate
from keel.api.identity.auth import Principal
from keel.workflows.run.models import Trigger

__all__ = ["ForkService"]


class ForkService:
    """Fork a run of the caller's tenant; read its steps (for checkpoints)."""

    def __init__(self, parts: CoreParts, runs: RunService) -> None:
        self._parts = parts
        self._runs = runs

    async def fork(
        self,
        run_id: str,
        body: ForkCreate,
        user: Principal,
        *,
        trigger: Trigger | None = None,
        session_id: str | None = None,
        on_busy: OnBusy = "enqueue",
    ) -> StartedRun:
        """Start the fork of `run_id` at `body.step`: another tenant's run is a 404
        (audited), a step it does not have a 422. With `session_id` (a LangGraph
        thread's), the fork joins that session; otherwise it is a run of its own."""
        source = await self._runs.get(run_id, user, allow_admin=False)
        point = ForkPoint(
            run_id=source.id,
            step=body.step,
            message=body.message,
            replace_message=body.replace_message,
        )
        conversation = await self._parts.store.conversation(source.id, source.session_id)
        seed = fork_seed(conversation, point, shown=run_id)
        order = RunOrder.of(
            agent=source.agent,
            input=body.message or source.input,
            workspace=body.workspace or source.workspace,
            trigger=trigger or body.trigger,
            run_id=body.run_id,
            session_id=session_id,
            on_busy=on_busy,
            model=source.model,
            metadata=source.metadata,
            fork=point.model_dump(),
        )
        return await self._runs.start(order, user, seed=seed)

    async def steps(self, record: RunRecord) -> list[MessageRecord]:
        """The run's own stored messages (no session turns), for a run already read
        through `RunService.get`."""
        return await self._parts.store.conversation(record.id, None)
