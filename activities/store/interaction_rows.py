"""An interaction as Postgres holds it and as an event tells it, for every writer.

The store that records decisions and the closing of a run's interactions when it ends
(`interaction_closing`) both read rows and write `interaction_resolved` events; here is
the one reading of a row and the one shape of that event.
"""

from __future__ import annotations

from typing import Any

from keel.workflows.gate.gate import canonical_json
from keel.workflows.interactions.models import Interaction

__all__ = ["COLUMNS", "event_data", "row_to_interaction"]

COLUMNS = (
    "id, kind, step, ord, call_id, tool, arguments, payload_hash, risk, subject, question,"
    " status, requester, approvers, decision, decided_by, decided_at, answer, created_at,"
    " expires_at, decision_id, approved_arguments, approved_hash"
)


def row_to_interaction(row: dict[str, Any]) -> Interaction:
    data = dict(row)
    data["arguments"] = canonical_json(row["arguments"])
    if row.get("approved_arguments") is not None:
        data["approved_arguments"] = canonical_json(row["approved_arguments"])
    return Interaction.model_validate(data)


def event_data(ia: Interaction) -> dict[str, object]:
    return {
        "interaction_id": ia.id,
        "kind": ia.kind,
        "status": ia.status,
        "tool": ia.tool,
        "subject": ia.subject,
        "question": ia.question,
        "payload_hash": ia.payload_hash,
        "arguments": ia.arguments,
        "risk": ia.risk,
        "approvers": ia.approvers,
        "expires_at": ia.expires_at.isoformat(),
        "decision": ia.decision,
        "decided_by": ia.decided_by,
        "approved_arguments": ia.approved_arguments,
        "approved_hash": ia.approved_hash,
    }
