"""The run's tool calls: one call the gate let run (or a person approved), run as an
activity of its kind.

`RunToolCalls` builds the call's input (with the rule that allowed it, for the audit
log), runs it where it belongs — a read or a quick write in the worker that holds the
workflow (local: one marker), `bash` as a regular activity, an MCP or plugin call on
record before the run goes on — and lets the `tool.after` hooks see a held output
first. `AgentRunWorkflow`'s tool round and `RunInteractions` (an approved call) use it.
"""

from __future__ import annotations

from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import ToolCalls
    from keel.workflows.gate.gate import GateDecision
    from keel.workflows.gate.models import GateResult
    from keel.workflows.gate.tool_specs import ToolSpec
    from keel.workflows.run.hooks import RunHooks
    from keel.workflows.run.models import RunInput, RunState
    from keel.workflows.run.step_models import ToolCallInput, ToolDigest

__all__ = ["RunToolCalls", "ToolCallHost", "rule_text"]


class SecretAsker(Protocol):
    """Asks the run's user for the secret a call needs (`RunSecrets`)."""

    async def ask_for_call(
        self, run: RunInput, ord_: int, decision: GateDecision
    ) -> str | GateResult | None: ...


class ToolCallHost(Protocol):
    """What the agent run offers its tool calls: the step they belong to, event numbers."""

    _state: RunState

    def _take_seqs(self, count: int) -> int: ...


class RunToolCalls:
    """Runs one allowed tool call and returns its digest (or the hooks' answer)."""

    def __init__(self, host: ToolCallHost, hooks: RunHooks) -> None:
        self._host = host
        self._hooks = hooks
        self.secrets: SecretAsker | None = None
        """Set by the run: a plugin tool with a `secret_prompt` asks its user first."""

    async def run(
        self,
        run: RunInput,
        ord_: int,
        decision: GateDecision,
        *,
        interaction_id: str | None = None,
        note: str | None = None,
    ) -> ToolDigest | GateResult:
        """Run the call at `ord_` of this step; `interaction_id` if a person approved it."""
        secret_ref = None
        if self.secrets is not None:
            asked = await self.secrets.ask_for_call(run, ord_, decision)
            if isinstance(asked, GateResult):  # declined or expired: it does not run
                return asked
            secret_ref = asked
        held = self._hooks.hold_output(run, decision)
        call = ToolCallInput(
            run_id=run.run_id,
            step=self._host._state.step,
            ord=ord_,
            call_id=decision.call.call_id,
            name=decision.call.name,
            arguments=decision.canonical_arguments,
            workspace=run.workspace,
            event_seq=self._host._take_seqs(2),
            interaction_id=interaction_id,
            secret_ref=secret_ref,
            tenant_id=run.tenant_id,
            allowed_by=rule_text(decision) if interaction_id is None else None,
            network=decision.network,
            hold_output=held,
            note=note,
        )
        digest = await self._execute(call, decision)
        return await self._hooks.after(run, call, decision) if held else digest

    async def _execute(self, call: ToolCallInput, decision: GateDecision) -> ToolDigest:
        summary = f"{call.name} {decision.subject}".strip()
        if decision.spec is not None and decision.spec.group == "mcp":
            # A call to another service: on record before the run goes on.
            return await run_activity(
                ToolCalls.run_mcp_tool, call, timeouts.MCP_TOOL_CALL, summary=summary
            )
        if decision.spec is not None and decision.spec.group == "plugin":
            # A plugin's code: on record before the run goes on, like a call to a service.
            return await run_activity(
                ToolCalls.run_plugin_tool, call, timeouts.PLUGIN_TOOL_CALL, summary=summary
            )
        # Short calls run in the worker that holds the workflow: one marker, no round trip.
        local = decision.spec is not None and runs_local(decision.spec)
        options = timeouts.tool_call(decision.run_limit_s)
        return await run_activity(
            ToolCalls.run_tool, call, options, local=local, summary=None if local else summary
        )


def runs_local(spec: ToolSpec) -> bool:
    """Reads and quick writes run as local activities; `bash` stays a regular one.

    A read is safe to repeat, so it need not be recorded before the next one starts.
    """
    return spec.read_only or spec.quick_write


def rule_text(decision: GateDecision, *, acting_only: bool = True) -> str | None:
    """The rule behind a policy decision, for the audit log (read calls: only denials)."""
    if decision.spec is None or (acting_only and decision.spec.read_only):
        return None
    rule = decision.rule
    return f"{rule.permission} {rule.pattern} {rule.action}" if rule else "risk default"
