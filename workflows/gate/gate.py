"""The tool gate: decides, in pure code, what happens to each tool call.

Unknown tools and invalid arguments become an error the model can correct; a
repeat of a call already answered in this run gets the stored answer again;
the rest are allowed, denied or sent to a person, as the permission rules say.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from keel.workflows.gate.mcp_tools import McpToolset
from keel.workflows.gate.models import MessageRef
from keel.workflows.gate.permissions import PermissionRule, decide, network_allowed
from keel.workflows.gate.plugin_refs import PluginToolset, argument_problems
from keel.workflows.gate.tool_specs import TOOL_SPECS, TaskArgs, ToolSpec
from keel.workflows.run.step_models import ToolCallRequest

Verdict = Literal["run", "ask", "deny", "error", "cached"]


@dataclass(frozen=True)
class GateDecision:
    """What to do with one tool call."""

    verdict: Verdict
    call: ToolCallRequest
    fingerprint: str = ""
    canonical_arguments: str = ""
    message: str = ""
    copy_of: MessageRef | None = None
    spec: ToolSpec | None = None
    subject: str = ""
    rule: PermissionRule | None = None
    run_limit_s: int | None = None
    """How long the call may run, if its arguments say (`ToolSpec.run_limit_of`)."""
    network: bool = False
    """A `bash` call a `network` rule lets reach the network."""
    hook: str = ""
    """The `tool.before` hook (`plugin/hook`) that denied the call or asked for it."""
    local: bool = False
    """Run by the client that started the run, which answers with the output."""

    @property
    def payload_hash(self) -> str:
        """SHA-256 of the canonical proposal: what an approver approves."""
        proposal = canonical_json({"tool": self.call.name, "arguments": self.canonical_arguments})
        return hashlib.sha256(proposal.encode()).hexdigest()


def canonical_json(value: object) -> str:
    """The one JSON spelling of a value: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ToolGate:
    """Validates tool calls against an agent's allowlist and the tool specs."""

    def __init__(
        self,
        allowed: list[str],
        agent_rules: list[PermissionRule] | None = None,
        mcp: McpToolset | None = None,
        subagents: list[str] | None = None,
        plugins: PluginToolset | None = None,
    ) -> None:
        self._subagents = list(subagents or [])
        # `task` is offered exactly when there are sub-agents to run.
        offered = [name for name in allowed if name != "task"]
        if self._subagents:
            offered.append("task")
        self._allowed = [name for name in offered if name in TOOL_SPECS]
        self._agent_rules = list(agent_rules or [])
        self._mcp = mcp or McpToolset()
        self._plugins = plugins or PluginToolset()

    @property
    def tool_names(self) -> list[str]:
        """The built-in tools offered to the model (MCP tools travel by reference)."""
        return list(self._allowed)

    @property
    def plugin_tool_names(self) -> list[str]:
        return self._plugins.names

    @property
    def mcp_tool_names(self) -> list[str]:
        return self._mcp.names

    @property
    def agent_rules(self) -> list[PermissionRule]:
        return list(self._agent_rules)

    def spec_of(self, name: str) -> ToolSpec | None:
        """The spec of a tool this gate offers, or None."""
        return self._spec(name)

    def _spec(self, name: str) -> ToolSpec | None:
        if name in self._allowed:
            return TOOL_SPECS[name]
        return self._mcp.spec(name) or self._plugins.spec(name)

    def check(
        self,
        call: ToolCallRequest,
        answered: dict[str, MessageRef],
        session_rules: list[PermissionRule] | None = None,
    ) -> GateDecision:
        spec = self._spec(call.name)
        if spec is None:
            down = self._mcp.unreachable_server(call.name)
            if down is not None:
                return GateDecision(
                    verdict="error",
                    call=call,
                    message=(
                        f"Error: the MCP server '{down}' could not be reached when this run "
                        f"started, so {call.name} is not available in this run. "
                        "Do without it, or say in your answer that it was unavailable."
                    ),
                )
            available = (
                ", ".join([*self._allowed, *self._mcp.names, *self._plugins.names]) or "none"
            )
            return GateDecision(
                verdict="error",
                call=call,
                message=f"Error: unknown tool '{call.name}'. Available tools: {available}.",
            )
        try:
            raw = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return GateDecision(
                verdict="error",
                call=call,
                message=(
                    f"Error: the arguments of {call.name} are not valid JSON ({exc.msg} at "
                    f"position {exc.pos}). Send a JSON object matching the tool's schema."
                ),
            )
        if not isinstance(raw, dict):
            return GateDecision(
                verdict="error",
                call=call,
                message=f"Error: the arguments of {call.name} must be a JSON object.",
            )
        try:
            args = spec.args_model.model_validate(raw)
            plugin_tool = self._plugins.ref(call.name) if spec.group == "plugin" else None
            problems = "; ".join(argument_problems(plugin_tool, raw) if plugin_tool else [])
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()
            )
        if problems:
            return GateDecision(
                verdict="error",
                call=call,
                message=(
                    f"Error: invalid arguments for {call.name}: {problems}. "
                    "Fix the arguments and call the tool again."
                ),
            )
        if isinstance(args, TaskArgs) and args.agent not in self._subagents:
            return GateDecision(
                verdict="error",
                call=call,
                message=(
                    f"Error: '{args.agent}' is not a sub-agent this agent may run. "
                    f"Choose one of: {', '.join(self._subagents)}."
                ),
            )
        canonical = canonical_json(args.model_dump())
        fingerprint = hashlib.sha256(f"{call.name}\n{canonical}".encode()).hexdigest()[:24]
        earlier = answered.get(fingerprint)
        if earlier is not None:
            return GateDecision(
                verdict="cached",
                call=call,
                fingerprint=fingerprint,
                canonical_arguments=canonical,
                copy_of=earlier,
                spec=spec,
            )
        subject = spec.subject(args)
        action, rule = decide(spec, subject, self._agent_rules, list(session_rules or []))
        network = spec.group == "bash" and network_allowed(
            subject, self._agent_rules, list(session_rules or [])
        )
        verdict: Verdict = "run" if action == "allow" else action
        if spec.group == "interact":
            verdict = "ask"  # a question always goes to a person
        message = ""
        if verdict == "deny":
            message = (
                f"Error: {call.name} on '{subject}' is denied by policy"
                f"{f' (rule {rule.permission} {rule.pattern})' if rule else ''}. "
                "Do not retry it; find another way or explain in your answer what is blocked."
            )
        return GateDecision(
            verdict=verdict,
            call=call,
            fingerprint=fingerprint,
            canonical_arguments=canonical,
            spec=spec,
            subject=subject,
            rule=rule,
            message=message,
            run_limit_s=spec.run_limit_s(args),
            network=network,
        )
