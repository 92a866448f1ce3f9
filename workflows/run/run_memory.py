"""Agent memory in the run loop: recall before the first call, facts after the end.

Both are activities (`AgentMemory`); neither ever fails the run. A run whose recall
keeps failing goes on without memories, one whose extraction keeps failing ends as it
would have. Only runs of agents with `memory: true` call them, behind `MEMORY_PATCH`,
so histories recorded before memory existed replay unchanged. Sub-agent runs neither
recall nor remember: their input is their parent's prompt, not what a user said; the
exception is the agent the router hands a request to, whose input is the user's own.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import AgentMemory
    from keel.workflows.memory.models import (
        MEMORY_PATCH,
        RecallInput,
        RememberInput,
        memory_owner,
    )
    from keel.workflows.run.models import RunInput, StartRunInput
    from keel.workflows.usage.models import Usage


def remembers(run: RunInput) -> bool:
    """Whether this run uses memory (decided from its input, so replay decides the same)."""
    for_user = run.trigger != "parent" or (run.task is not None and run.task.routed)
    return run.agent.memory and for_user and workflow.patched(MEMORY_PATCH)


async def recall(run: RunInput, opening: StartRunInput | None, event_seq: int) -> bool:
    """Give the model the user's relevant memories; True if it ran (and opened the run)."""
    try:
        await run_activity(
            AgentMemory.recall_memories,
            RecallInput(
                run_id=run.run_id,
                tenant_id=run.tenant_id,
                user_id=memory_owner(run.requester),
                session_id=run.session_id,
                event_seq=event_seq,
                start=opening,
            ),
            timeouts.MEMORY_RECALL,
            local=True,
            summary="recall memories",
        )
    except FailureError as err:
        # A local activity fails with its cause itself, a regular one inside ActivityError.
        cause = err.cause if isinstance(err, ActivityError) else err
        if isinstance(cause, CancelledError):
            raise
        workflow.logger.warning("memory recall of %s failed: %s", run.run_id, cause)
        return False
    return True


async def remember(run: RunInput) -> Usage:
    """Store the facts worth keeping from the finished run; the tokens it spent."""
    try:
        result = await run_activity(
            AgentMemory.remember_facts,
            RememberInput(
                run_id=run.run_id,
                tenant_id=run.tenant_id,
                user_id=memory_owner(run.requester),
                session_id=run.session_id,
                model=run.model,
            ),
            timeouts.MEMORY_EXTRACTION,
            summary="remember facts",
        )
    except ActivityError as err:
        if isinstance(err.cause, CancelledError):
            raise
        workflow.logger.warning("memory extraction of %s failed: %s", run.run_id, err.cause)
        return Usage()
    if not result.tokens:
        return Usage()
    prompt, completion = result.tokens
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cost_usd=result.cost_usd)
