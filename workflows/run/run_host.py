"""What `AgentRunWorkflow` offers the step groups mixed into it (`RouterSteps`,
`AgentRolesSteps`): declared once, for the type checker only.

A mixin names this class as its base under `TYPE_CHECKING` and `object` otherwise, so
the workflow's own definitions are the only ones that exist when it runs.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from keel.workflows.interactions.models import Interaction
from keel.workflows.run.models import (
    RunInput,
    RunResult,
    RunState,
    RunStatus,
    StartRunInput,
    StopReason,
)
from keel.workflows.run.notices import RunNotices
from keel.workflows.run.subagent_runs import RunSubagents

T = TypeVar("T")


class RunHost(Protocol):
    """The agent run's state and steps that a mixed-in group of steps may use."""

    _state: RunState
    _opening: StartRunInput | None
    """The run's record, while a fast start leaves it to the first model call."""

    def _take_seqs(self, count: int) -> int: ...

    async def _record_opening(self) -> None: ...

    _subagents: RunSubagents

    async def _await_decision(self, interaction: Interaction) -> None: ...

    _notices: RunNotices

    async def _finish(
        self,
        run: RunInput,
        status: RunStatus,
        reason: StopReason,
        *,
        error: str | None = None,
        final_step: int | None = None,
    ) -> RunResult: ...
