"""The run's plugin hooks: `tool.before`, `tool.after` and `run.end`.

`RunHooks` asks the agent's hooks (activities, in a fixed order, every decision audited
by the activity) about the run's tool calls and its end. Hooks can only tighten what
the rules allow, and a hook that keeps failing never lets a call run unjudged nor an
output reach the model unseen. `AgentRunWorkflow` composes it; `RunInteractions` asks
it about an approver's edited call as the model's was asked.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import PluginHooks
    from keel.workflows.gate.gate import GateDecision
    from keel.workflows.gate.hook_models import (
        AfterHooksInput,
        BeforeHooksInput,
        HookCall,
        RunEndInput,
    )
    from keel.workflows.gate.models import GateResult
    from keel.workflows.gate.plugin_refs import FAILED_HOOKS, hooks_for
    from keel.workflows.run.models import RunInput, RunState, RunStatus, StopReason
    from keel.workflows.run.step_models import ToolCallInput, ToolDigest

__all__ = ["HookHost", "RunHooks"]


class HookHost(Protocol):
    """What the agent run offers its hooks: the step they judge, its event numbers."""

    _state: RunState

    def _take_seqs(self, count: int) -> int: ...


class RunHooks:
    """Runs the agent's hooks around tool calls and at the run's end."""

    def __init__(self, host: HookHost) -> None:
        self._host = host

    async def before(
        self, run: RunInput, decisions: list[tuple[int, GateDecision]]
    ) -> list[tuple[int, GateDecision]]:
        """`tool.before` hooks judge the calls the rules would run or ask about.

        They can only tighten: deny (the model is told the hook's reason) or ask a
        person; an allow leaves the rules' verdict. Hooks that keep failing refuse the
        calls they had to judge, so no call runs unjudged.
        """
        calls = [
            HookCall(
                ord=o,
                call_id=d.call.call_id,
                tool=d.call.name,
                arguments=d.canonical_arguments,
                subject=d.subject,
                risk=d.spec.risk,
                verdict="run" if d.verdict == "run" else "ask",
            )
            for o, d in decisions
            if d.verdict in ("run", "ask")
            and d.spec is not None
            and d.spec.group != "interact"
            and hooks_for(run.agent.hooks, "tool.before", d.call.name)
        ]
        if not calls:
            return decisions
        judged = BeforeHooksInput(
            run_id=run.run_id,
            tenant_id=run.tenant_id,
            agent=run.agent.name,
            step=self._host._state.step,
            hooks=hooks_for(run.agent.hooks, "tool.before"),
            calls=calls,
        )
        try:
            result = await run_activity(
                PluginHooks.tool_before_hooks, judged, timeouts.HOOK_CALL, summary="tool.before"
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise
            failed = (
                f"Error: this call did not run: the tool.before hooks that must judge it "
                f"failed ({err.cause or err}). Tell the user; retrying will not help."
            )
            refused = {c.ord for c in calls}
            return [
                (o, dataclasses.replace(d, verdict="deny", message=failed, hook=FAILED_HOOKS))
                if o in refused
                else (o, d)
                for o, d in decisions
            ]
        verdicts = {v.ord: v for v in result.verdicts}
        judged_decisions: list[tuple[int, GateDecision]] = []
        for ord_, decision in decisions:
            verdict = verdicts.get(ord_)
            if verdict is not None and verdict.action == "deny":
                decision = dataclasses.replace(
                    decision,
                    verdict="deny",
                    hook=verdict.hook,
                    message=(
                        f"Error: {decision.call.name} was refused by the hook {verdict.hook}: "
                        f"{verdict.reason or 'no reason given'}. Do not retry it unchanged."
                    ),
                )
            elif verdict is not None and verdict.action == "ask":
                decision = dataclasses.replace(decision, verdict="ask", hook=verdict.hook)
            judged_decisions.append((ord_, decision))
        return judged_decisions

    @staticmethod
    def hold_output(run: RunInput, decision: GateDecision) -> bool:
        """Whether `tool.after` hooks must see the call's output before the model does."""
        return (
            decision.spec is not None
            and decision.spec.group != "task"
            and bool(hooks_for(run.agent.hooks, "tool.after", decision.call.name))
        )

    async def after(
        self, run: RunInput, call: ToolCallInput, decision: GateDecision
    ) -> ToolDigest | GateResult:
        """`tool.after` hooks annotate or redact a held output before the model sees it.

        Hooks that keep failing withhold the output: the model is told, the run goes on.
        """
        try:
            return await run_activity(
                PluginHooks.tool_after_hooks,
                AfterHooksInput(
                    call=call,
                    agent=run.agent.name,
                    hooks=hooks_for(run.agent.hooks, "tool.after", call.name),
                    subject=decision.subject,
                    risk=decision.spec.risk if decision.spec is not None else "read",
                ),
                timeouts.HOOK_CALL,
                summary=f"tool.after {call.name}",
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise
            return GateResult(
                step=call.step,
                ord=call.ord,
                call_id=call.call_id,
                name=call.name,
                arguments=call.arguments,
                content=(
                    f"Error: {call.name} ran, but the tool.after hooks that must see its "
                    f"output failed ({err.cause or err}), so the output is withheld."
                ),
                event_seq=self._host._take_seqs(2),
            )

    async def run_end(
        self, run: RunInput, status: RunStatus, reason: StopReason, error: str | None
    ) -> None:
        """`run.end` hooks (a notification, a ticket): the run's outcome stands whatever they do.

        Only agents with `run.end` hooks make the call.
        """
        if not hooks_for(run.agent.hooks, "run.end"):
            return
        try:
            await run_activity(
                PluginHooks.run_end_hooks,
                RunEndInput(
                    run_id=run.run_id,
                    tenant_id=run.tenant_id,
                    agent=run.agent.name,
                    status=status,
                    stop_reason=reason,
                    error=error,
                    hooks=hooks_for(run.agent.hooks, "run.end"),
                ),
                timeouts.HOOK_CALL,
                summary="run.end",
            )
        except ActivityError as err:
            workflow.logger.warning("run.end hooks of %s failed: %s", run.run_id, err.cause)
