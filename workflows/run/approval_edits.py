"""Approve with edits: an approver's changed arguments pass the model's gate again.

An edit is a new proposal of the same tool, so it meets what a model's call meets:
the tool's schema, the permission rules (agent and session), and the workspace. It
may ask or run under the rules, never be denied, and never name a path outside the
workspace. What runs is the edited payload, hashed like a proposal, and the model is
told which arguments the person changed.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows.gate.gate import GateDecision, ToolGate
    from keel.workflows.gate.permissions import PermissionRule
    from keel.workflows.interactions.models import Interaction
    from keel.workflows.run.step_models import ToolCallRequest

__all__ = ["EditRefused", "check_edit", "edit_note"]

NOTE_VALUE_CHARS = 200
PATH_FIELDS = ("path", "cwd")


class EditRefused(Exception):
    """The gate refuses the edited call; the message says why, for the approver."""


def check_edit(
    gate: ToolGate, interaction: Interaction, arguments: str, rules: list[PermissionRule]
) -> GateDecision:
    """The gate's decision on the edited call, ready to run; `EditRefused` if it may not."""
    call = ToolCallRequest(call_id=interaction.call_id, name=interaction.tool, arguments=arguments)
    decision = gate.check(call, {}, rules)
    if decision.verdict == "error":
        raise EditRefused(_for_a_person(decision.message, interaction.tool))
    if decision.verdict == "deny":
        rule = decision.rule
        by = f" by the rule {rule.permission} {rule.pattern} {rule.action}" if rule else ""
        raise EditRefused(
            f"The edited {interaction.tool} call on '{decision.subject}' is denied{by}; "
            "an edit may not turn a call into one the rules deny."
        )
    for path in _paths_of(decision):
        if _escapes(path):
            raise EditRefused(
                f"The edited {interaction.tool} call names '{path}', outside the run's "
                "workspace; use a path relative to the workspace root."
            )
    # The approver has decided it: it runs now, whatever the rules would have asked.
    return dataclasses.replace(decision, verdict="run")


def edit_note(interaction: Interaction, approved: str) -> str:
    """What the model is told before the output of a call a person changed."""
    before = json.loads(interaction.arguments)
    after = json.loads(approved)
    changes = []
    for key in sorted({*before, *after}):
        if key not in after:
            changes.append(f"removed {key}")
        elif key not in before:
            changes.append(f"added {key}={_shown(after[key])}")
        elif before[key] != after[key]:
            changes.append(f"{key}: {_shown(before[key])} -> {_shown(after[key])}")
    return (
        f"Note: {interaction.decided_by} approved this {interaction.tool} call with changes "
        f"({'; '.join(changes)}); it ran with the arguments {_shown(after, 1000)}, not the "
        "ones you proposed. The output below is of the changed call."
    )


def _shown(value: object, limit: int = NOTE_VALUE_CHARS) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _paths_of(decision: GateDecision) -> list[str]:
    """The workspace paths a call names: a file tool's `path`, a command's `cwd`."""
    if decision.spec is None:
        return []
    fields = decision.spec.args_model.model_fields
    arguments = json.loads(decision.canonical_arguments)
    return [
        arguments[name]
        for name in PATH_FIELDS
        if name in fields and isinstance(arguments.get(name), str)
    ]


def _escapes(path: str) -> bool:
    normal = posixpath.normpath(path.replace("\\", "/"))
    return normal.startswith("/") or normal == ".." or normal.startswith("../")


def _for_a_person(message: str, tool: str) -> str:
    """The gate's error, which speaks to a model, said to the approver."""
    text = message.removeprefix("Error: ")
    for tail in (" Fix the arguments and call the tool again.", " Send a JSON object"):
        text = text.split(tail)[0]
    return f"The edited {tool} call is refused: {text.rstrip('.')}."
