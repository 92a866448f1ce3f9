"""What a chat front end's resume (LangGraph's `command.resume`, an AG-UI resume entry) decides.

Chat front ends answer an interrupt in several spellings; each becomes one
`InteractionDecisionCreate`, checked by the same `DecisionService` as every other
surface. A resume that names no `payload_hash` approves the payload the interrupt
showed: an interaction's payload never changes, and the decision still names it. An
agent-inbox `edit` approves with the edited arguments, which the run checks like a
model's call.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from keel.api.core.errors import Invalid, invalid_request
from keel.api.core.schemas.interactions import InteractionDecisionCreate, InteractionPublic

__all__ = ["decisions_for"]

APPROVE = frozenset({"approve", "accept", "approved", "yes", "y", "ok"})
REJECT = frozenset({"reject", "ignore", "rejected", "no", "n", "deny"})
HOW = (
    "Resume with true/false, 'approve'/'reject', "
    '{"decision": "approve" | "approve_always" | "reject" | "answer", "payload_hash": ..., '
    '"text": ..., "arguments": {edited arguments}, "grant": {"kind": "run" | "session" | '
    '"agent", "pattern": ..., "until": ...}}, an answer text for a question, or a map '
    "of interrupt id to one of those."
)


def decisions_for(
    value: Any, pending: list[InteractionPublic]
) -> list[tuple[InteractionPublic, InteractionDecisionCreate]]:
    """The decision for each interrupt the resume answers.

    A map keyed by interrupt ids answers those; any other value answers the one
    pending interrupt (refused when several wait, since it would be ambiguous)."""
    if not pending:
        raise Invalid("Nothing is waiting to be resumed on this thread.", field="command.resume")
    by_id = {ia.id: ia for ia in pending}
    if isinstance(value, dict) and value and set(value) <= set(by_id):
        return [(by_id[key], _decision(answer, by_id[key])) for key, answer in value.items()]
    if len(pending) > 1:
        raise Invalid(
            f"{len(pending)} interrupts are waiting ({', '.join(by_id)}); resume with a map "
            "of interrupt id to its answer.",
            field="command.resume",
        )
    return [(pending[0], _decision(value, pending[0]))]


def _decision(value: Any, ia: InteractionPublic) -> InteractionDecisionCreate:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]  # agent-inbox style: a list of one response
    fields = _fields(value, ia)
    if fields.get("decision", "").startswith("approve"):
        fields.setdefault("payload_hash", ia.payload_hash)
    try:
        return InteractionDecisionCreate.model_validate(fields)
    except ValidationError as exc:
        raise invalid_request(exc) from exc


def _fields(value: Any, ia: InteractionPublic) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"decision": "approve" if value else "reject"}
    if isinstance(value, str):
        word = value.strip().lower()
        if ia.kind == "ask_user":
            return {"decision": "answer", "text": value}
        if word in APPROVE or word == "approve_always":
            return {"decision": "approve_always" if word == "approve_always" else "approve"}
        if word in REJECT:
            return {"decision": "reject"}
        raise Invalid(f"'{value}' does not answer an approval. {HOW}", field="command.resume")
    if isinstance(value, dict):
        if "decision" in value:
            return dict(value)
        kind = value.get("type")  # agent-inbox: accept | ignore | response | edit
        if kind in ("accept", "ignore"):
            return {"decision": "approve" if kind == "accept" else "reject"}
        if kind == "response":
            text = value.get("args")
            return {"decision": "answer" if ia.kind == "ask_user" else "reject", "text": text}
        if kind == "edit":  # agent-inbox: {"type": "edit", "args": {"action", "args"}}
            edit = value.get("args")
            if isinstance(edit, dict) and isinstance(edit.get("args"), dict):
                edit = edit["args"]
            if not isinstance(edit, dict):
                raise Invalid(
                    "An edit needs the call's arguments as an object in `args.args`.",
                    field="command.resume",
                )
            return {"decision": "approve", "arguments": edit}
    raise Invalid(
        f"The resume value does not answer interrupt {ia.id}. {HOW}", field="command.resume"
    )
