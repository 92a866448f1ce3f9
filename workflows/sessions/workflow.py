"""`SessionWorkflow`: one conversation, one active run at a time.

Messages posted to a session become runs that see the session's history. A
message that arrives while a run is active is refused, queued, or interrupts
the active run, as the caller chose. The session workflow starts each run as a
child workflow, so the order survives every restart.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import InteractionRecords, RunRecords
    from keel.workflows.run.agent_run import AgentRunWorkflow
    from keel.workflows.run.models import FinishRunInput, RunResult
    from keel.workflows.run.run_visibility import run_memo, run_search_attributes
    from keel.workflows.sessions.models import (
        SessionRulesInput,
        SessionState,
        SessionSubmission,
        SubmitOutcome,
        Withdrawal,
        WithdrawOutcome,
    )
    from keel.workflows.usage.models import Usage

RUNS_BEFORE_CONTINUE_AS_NEW = 200
SESSION_GRANTS_PATCH = "session-run-grants"
"""The patch under which a session's next run gets the live grants that cover it."""


@workflow.defn(name="SessionWorkflow")
class SessionWorkflow:
    @workflow.init
    def __init__(self, state: SessionState) -> None:
        self._state = state
        self._child: ChildWorkflowHandle[AgentRunWorkflow, RunResult] | None = None
        self._cancel_active = False

    @workflow.run
    async def run(self, state: SessionState) -> None:
        while True:
            await workflow.wait_condition(lambda: bool(self._state.queue))
            submission = self._state.queue.pop(0)
            await self._run_one(submission)
            self._state.runs_done += 1
            if self._state.runs_done >= RUNS_BEFORE_CONTINUE_AS_NEW and not self._state.queue:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._state.model_copy(update={"runs_done": 0}))

    async def _run_one(self, submission: SessionSubmission) -> None:
        run = submission.run
        self._state.active = run.run_id
        grants = workflow.patched(SESSION_GRANTS_PATCH)
        rules = await run_activity(
            InteractionRecords.session_rules,
            SessionRulesInput(
                session_id=self._state.session_id,
                tenant_id=run.tenant_id if grants else None,
                agent=run.agent.name if grants else None,
                requester=run.requester if grants else None,
            ),
            timeouts.STORE_CALL,
        )
        update: dict[str, object] = {"session_rules": rules.rules}
        if grants:  # the grants as they are now, not when the message was queued
            update["grants"] = rules.grants
        run = run.model_copy(update=update)
        try:
            self._child = await workflow.start_child_workflow(
                AgentRunWorkflow.run,
                run,
                id=run.run_id,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                search_attributes=run_search_attributes(run),
                memo=run_memo(run),
            )
            if self._cancel_active:
                self._child.cancel()
            await self._child
        except ChildWorkflowError:
            pass  # the run recorded its own failure or cancellation
        finally:
            self._child = None
            self._cancel_active = False
            self._state.active = None

    @workflow.update  # named after the method; bare, so a reference to it types its result
    async def submit(self, submission: SessionSubmission) -> SubmitOutcome:
        interrupted = None
        if submission.on_busy == "interrupt" and self._state.active is not None:
            interrupted = self._state.active
            self._state.queue.insert(0, submission)
            if self._child is not None:
                self._child.cancel()
            else:
                self._cancel_active = True
            position = 0
        else:
            self._state.queue.append(submission)
            position = len(self._state.queue) - (0 if self._state.active else 1)
        return SubmitOutcome(
            run_id=submission.run.run_id, position=position, interrupted=interrupted
        )

    @submit.validator
    def _validate_submit(self, submission: SessionSubmission) -> None:
        busy = self._state.active is not None or bool(self._state.queue)
        if busy and submission.on_busy == "reject":
            raise ApplicationError(
                f"Session {self._state.session_id} is busy with run "
                f"{self._state.active or self._state.queue[0].run.run_id}; "
                "send on_busy=enqueue or interrupt, or wait for it to finish.",
                type="SessionBusy",
                non_retryable=True,
            )
        known = {s.run.run_id for s in self._state.queue} | {self._state.active}
        if submission.run.run_id in known:
            raise ApplicationError(
                f"Run {submission.run.run_id} is already in this session.",
                type="DuplicateRun",
                non_retryable=True,
            )

    @workflow.update
    async def withdraw(self, withdrawal: Withdrawal) -> WithdrawOutcome:
        """Cancel a run of this session: drop it from the queue, or cancel it if active."""
        run_id = withdrawal.run_id
        for index, queued in enumerate(self._state.queue):
            if queued.run.run_id == run_id:
                self._state.queue.pop(index)
                await run_activity(
                    RunRecords.finish_run,
                    FinishRunInput(
                        run_id=run_id,
                        status="cancelled",
                        stop_reason="cancelled",
                        steps=0,
                        tool_calls=0,
                        usage=Usage(),
                        event_seq=1,
                    ),
                    timeouts.STORE_CALL,
                )
                return WithdrawOutcome(run_id=run_id, was="queued")
        if self._state.active == run_id:
            if self._child is not None:
                self._child.cancel()
            else:
                self._cancel_active = True  # it is starting: cancel it as soon as it has
            return WithdrawOutcome(run_id=run_id, was="active")
        return WithdrawOutcome(run_id=run_id, was="unknown")

    @workflow.query(name="state")
    def state(self) -> SessionState:
        return self._state
