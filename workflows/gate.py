"""The tool gate: decides, in pure code, what happens to each tool call.

Unknown tools and invalid arguments become an error the model can correct; a
repeat of a call already answered in this run gets the stored answer again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from workflows.models import MessageRef, ToolCallRequest
from workflows.tool_specs import TOOL_SPECS, ToolSpec

Verdict = Literal["run", "error", "cached"]


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


def canonical_json(value: object) -> str:
    """The one JSON spelling of a value: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ToolGate:
    """Validates tool calls against an agent's allowlist and the tool specs."""

    def __init__(self, allowed: list[str]) -> None:
        self._allowed = [name for name in allowed if name in TOOL_SPECS]

    @property
    def tool_names(self) -> list[str]:
        return list(self._allowed)

    def check(self, call: ToolCallRequest, answered: dict[str, MessageRef]) -> GateDecision:
        spec = TOOL_SPECS.get(call.name)
        if spec is None or call.name not in self._allowed:
            available = ", ".join(self._allowed) or "none"
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
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()
            )
            return GateDecision(
                verdict="error",
                call=call,
                message=(
                    f"Error: invalid arguments for {call.name}: {problems}. "
                    "Fix the arguments and call the tool again."
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
        return GateDecision(
            verdict="run",
            call=call,
            fingerprint=fingerprint,
            canonical_arguments=canonical,
            spec=spec,
        )
