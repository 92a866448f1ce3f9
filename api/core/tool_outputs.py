"""The whole stored output of one tool call, which a run's events only preview."""

from __future__ import annotations

from keel.activities.store.console_reads import ConsoleReads, StoredToolOutput
from keel.api.core.errors import NotFound
from keel.api.core.runs import RunService
from keel.api.identity.auth import Principal

__all__ = ["ToolOutputs"]


class ToolOutputs:
    def __init__(self, runs: RunService, reads: ConsoleReads) -> None:
        self._runs = runs
        self._reads = reads

    async def get(self, run_id: str, step: int, call_id: str, user: Principal) -> StoredToolOutput:
        """One call's output, for a run the caller may read; `NotFound` otherwise."""
        record = await self._runs.get(run_id, user)
        output = await self._reads.tool_output(record.tenant_id, record.id, step, call_id)
        if output is None:
            raise NotFound(f"No output of call {call_id} at step {step} of {run_id}.")
        return output
