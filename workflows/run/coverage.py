"""Coverage that Keel guarantees: the run reads every file, whatever its model does.

For an agent whose file says `coverage: files` (the built-in `review` does), the run
plans the reading before its model's first call: an activity lists the workspace,
this code decides which files must be read (`coverage_plan.skip_reason`) and splits
them into parts that fit the model's window, and each part runs as a child run of
`explore`, a bounded number at once, whether or not the model ever calls `task`.
After each round the ledger (what Postgres recorded each run of the tree was shown)
says which files are still unread, and those are handed out again, for a few rounds.
The parts' answers become a note the model writes its report from; at the end the
ledger becomes the report's coverage section, appended by Keel.

Runs recorded before this existed carry no `coverage` in their agent, so they take
none of these steps and replay unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import CancelledError, ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import Coverage, Subagents
    from keel.workflows.run import budget, subagents
    from keel.workflows.run.coverage_plan import (
        MAX_ROUNDS,
        CoverageClose,
        CoverageState,
        CoverageSummary,
        ListWorkspaceInput,
        PartsNoteInput,
        PlannedPart,
        WorkspaceFile,
        WorkspaceListing,
        plan_parts,
        skip_reason,
    )
    from keel.workflows.run.models import RunInput, RunResult, RunState, RunStatus
    from keel.workflows.run.subagent_models import ChildEventInput, ChildRun, SubagentTask
    from keel.workflows.usage.models import Usage

__all__ = ["CoverageDriver", "covers_files"]

PART_AGENT = "explore"
# A part that stopped on a ceiling: `token_budget` as runs recorded before `budget` say it.
BUDGET_STOPS = ("budget", "token_budget")
COVERAGE_PATCH = "coverage-plans"
# Of a ceiling (tokens or cost), what the parts leave for the run's own report.
REPORT_RESERVE_SHARE = 0.1


class PartShares(NamedTuple):
    """A round's parts under the run's ceilings: how many run, and each one's share."""

    parts: int
    tokens: int | None
    cost_usd: float | None
    limit: budget.Ceiling | None = None  # the ceiling that left parts of the round out


def covers_files(run: RunInput) -> bool:
    """Whether Keel plans this run's reading: its agent asks, and the user started it.

    Behind a patch: a run an older worker began (which ignored `coverage`) goes on
    without a plan when a newer worker takes it over.
    """
    for_user = run.task is None or run.task.routed
    asks = run.agent.coverage == "files" and for_user
    return asks and run.depth < subagents.MAX_SUBAGENT_DEPTH and workflow.patched(COVERAGE_PATCH)


class CoverageDriver:
    """Plans the parts, runs them, hands unread files out again, and closes the ledger."""

    def __init__(self, state: RunState, take_seqs: Callable[[int], int]) -> None:
        self._state = state
        self._take_seqs = take_seqs

    async def drive(self, run: RunInput) -> None:
        """Have every file the plan must read read by a part, before the model's first call."""
        listing = await run_activity(
            Coverage.list_workspace,
            ListWorkspaceInput(
                run_id=run.run_id,
                workspace=run.workspace,
                model=run.model,
                context_window=run.agent.context_window,
                tenant_id=run.tenant_id,
            ),
            timeouts.COVERAGE_LISTING,
            summary="list workspace for coverage",
        )
        coverage = CoverageState(truncated=listing.truncated)
        pending: list[WorkspaceFile] = []
        for file in listing.files:
            reason = skip_reason(file)
            if reason is None:
                pending.append(file)
                coverage.files.append(file.path)
            else:
                coverage.skipped[file.path] = reason
        self._state.coverage = coverage
        part_runs: list[str] = []
        for round_ in range(1, MAX_ROUNDS + 1):
            if not pending:
                break
            parts = plan_parts(pending, listing.usable_tokens, round_)
            shares = self._shares(run, len(parts), listing)
            if isinstance(shares, str):  # not one part fits: that ceiling is spent
                self._unread(pending, self._spent_reason(run, shares))
                break
            count = shares.parts
            for part in parts[count:]:
                self._unread_paths(part.files, self._spent_reason(run, shares.limit))
            outcomes = await self._run_parts(run, parts[:count], shares)
            coverage.parts += count
            coverage.rounds = round_
            part_runs += [run_id for run_id, _ in outcomes]
            for (run_id, result), part in zip(outcomes, parts[:count], strict=True):
                self._unread_paths(part.files, _part_reason(run, run_id, result))
                if result is not None and result.stop_reason in BUDGET_STOPS:
                    coverage.stopped_by = "budget"
            ledger = await self.close(run, "running")
            still = set(ledger.unread)
            for path in [p for p in coverage.unread if p not in still]:
                del coverage.unread[path]
            pending = [f for f in pending if f.path in still]
        if part_runs:
            await run_activity(
                Coverage.note_parts,
                PartsNoteInput(
                    run_id=run.run_id,
                    tenant_id=run.tenant_id,
                    usable_tokens=listing.usable_tokens,
                    parts=part_runs,
                ),
                timeouts.STORE_CALL,
                local=True,
                summary="note parts",
            )

    async def close(self, run: RunInput, stop_reason: str) -> CoverageSummary:
        """The ledger over the run's tree, stored on the run with its coverage section."""
        assert self._state.coverage is not None
        return await run_activity(
            Coverage.close_coverage,
            CoverageClose(
                run_id=run.run_id,
                tenant_id=run.tenant_id,
                state=self._state.coverage,
                stop_reason=stop_reason,
            ),
            timeouts.STORE_CALL,
            local=True,
            summary="coverage ledger",
        )

    def _shares(
        self, run: RunInput, parts: int, listing: WorkspaceListing
    ) -> PartShares | budget.Ceiling:
        """How many parts run this round and each one's tokens and cost; the ceiling that
        is spent when not one part fits.

        A part with less than one window of tokens (or of its cost) could not read a page
        and answer; what a ceiling reserves for the run's own report is left out.
        """
        limits, spent = run.agent.limits, self._state.usage
        count, tokens, cost = parts, None, None
        limit: budget.Ceiling | None = None
        if limits.max_total_tokens is not None:
            usable = listing.usable_tokens
            reserve = min(int(limits.max_total_tokens * REPORT_RESERVE_SHARE), 2 * usable)
            left = limits.max_total_tokens - reserve - spent.total_tokens
            count = min(count, left // usable) if left > 0 else 0
            if count < 1:
                return "max_total_tokens"
            tokens = left
            if count < parts:
                limit = "max_total_tokens"
        if limits.max_cost_usd is not None:
            window = listing.window_cost_usd
            reserve_usd = limits.max_cost_usd * REPORT_RESERVE_SHARE
            if window > 0:
                reserve_usd = min(reserve_usd, 2 * window)
            left_usd = limits.max_cost_usd - reserve_usd - spent.cost_usd
            fit = int(left_usd // window) if window > 0 else parts
            if left_usd <= 0 or fit < 1:
                return "max_cost_usd"
            if fit < count:
                count, limit = fit, "max_cost_usd"
            cost = left_usd
        return PartShares(
            parts=count,
            tokens=None if tokens is None else tokens // count,
            cost_usd=None if cost is None else cost / count,
            limit=limit,
        )

    def _spent_reason(self, run: RunInput, limit: budget.Ceiling | None) -> str:
        assert self._state.coverage is not None
        self._state.coverage.stopped_by = "budget"
        ceiling = budget.ceilings_text(run.agent.limits, limit)
        return f"budget spent: the run's ceiling ({ceiling}) was reached"

    def _unread(self, files: list[WorkspaceFile], reason: str) -> None:
        self._unread_paths([f.path for f in files], reason)

    def _unread_paths(self, paths: list[str], reason: str) -> None:
        assert self._state.coverage is not None
        for path in paths:
            self._state.coverage.unread[path] = reason

    async def _run_parts(
        self, run: RunInput, parts: list[PlannedPart], share: PartShares
    ) -> list[tuple[str, RunResult | None]]:
        parallel = asyncio.Semaphore(
            run.agent.limits.max_parallel_subagents or run.max_parallel_subagents
        )
        children = [self._part_input(run, index, part, share) for index, part in enumerate(parts)]

        async def one(child: RunInput) -> tuple[str, RunResult | None]:
            async with parallel:
                return await self._run_part(run, child)

        return list(await asyncio.gather(*(one(c) for c in children)))

    def _part_input(
        self, run: RunInput, index: int, part: PlannedPart, share: PartShares
    ) -> RunInput:
        task = SubagentTask(
            step=0,
            ord=index,
            event_seq=self._take_seqs(2),
            max_tool_calls=part.max_tool_calls,
            max_total_tokens=share.tokens,
            max_cost_usd=share.cost_usd,
            part=part.label,
            files=part.files,
            max_steps=part.max_steps,
        )
        return subagents.child_input(run, PART_AGENT, task)

    async def _run_part(self, run: RunInput, child: RunInput) -> tuple[str, RunResult | None]:
        """One part to its end; its usage counts on the run (and against its ceiling)."""
        task = child.task
        assert task is not None
        run_id = subagents.task_run_id(run.run_id, task)
        record = ChildRun(run_id=run_id, agent=PART_AGENT, step=task.step, ord=task.ord)
        self._state.children[run_id] = record
        result: RunResult | None = None
        status: RunStatus = "failed"
        try:
            result = await workflow.execute_child_workflow(
                "AgentRunWorkflow",
                child,
                id=run_id,
                result_type=RunResult,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
            status = result.status
        except ChildWorkflowError as err:
            status = "cancelled" if isinstance(err.cause, CancelledError) else "failed"
        except WorkflowAlreadyStartedError:
            workflow.logger.warning("coverage part %s was already started", run_id)
        usage = result.usage if result is not None else Usage()
        tool_calls = result.tool_calls if result is not None else 0
        self._state.usage = self._state.usage.plus(usage)
        finished = subagents.finished(record, status, tool_calls, usage)
        self._state.children[run_id] = finished
        await run_activity(
            Subagents.record_child_event,
            ChildEventInput(
                run_id=run.run_id, event_seq=self._take_seqs(1), child=finished.model_copy()
            ),
            timeouts.STORE_CALL,
            local=True,
        )
        return run_id, result


def _part_reason(run: RunInput, run_id: str, result: RunResult | None) -> str:
    """Why a file of this part may still be unread, should the ledger say it is."""
    if result is None or result.status != "completed":
        status = result.status if result is not None else "failed"
        return f"a sub-agent failed: its part's run {run_id} ended {status}"
    if result.stop_reason in BUDGET_STOPS:
        ceiling = budget.ceilings_text(run.agent.limits)
        return (
            f"budget spent: its part's run {run_id} reached its share of the run's "
            f"ceiling ({ceiling})"
        )
    if result.stop_reason != "final_answer":
        return f"its part's run {run_id} stopped on {result.stop_reason} before reading it"
    return f"not read whole by its part's run {run_id}"
