"""A run seen as an A2A Task: state, status message, history and artifacts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Value
from google.protobuf.timestamp_pb2 import Timestamp

from keel.activities.store.records import RunRecord
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.core.tenant_ids import in_view
from keel.workflows.interactions.models import Interaction
from keel.workflows.run.findings import FINDING_FIELDS
from keel.workflows.usage.models import TreeUsage

TERMINAL_STATES = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
# What the agents read from a message: text (and text/* files), and JSON data parts.
INPUT_MODES = ("text/plain", "application/json")
INTERRUPTED_STATES = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
RUN_STATE = {
    "queued": TaskState.TASK_STATE_SUBMITTED,
    "running": TaskState.TASK_STATE_WORKING,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}
STATE_RUNS = {
    TaskState.TASK_STATE_SUBMITTED: ["queued"],
    TaskState.TASK_STATE_WORKING: ["running"],
    TaskState.TASK_STATE_INPUT_REQUIRED: ["running"],
    TaskState.TASK_STATE_COMPLETED: ["completed"],
    TaskState.TASK_STATE_FAILED: ["failed"],
    TaskState.TASK_STATE_CANCELED: ["cancelled"],
}


def _stamp(when: datetime | None) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime((when or datetime.now(UTC)).astimezone(UTC))
    return stamp


def text_message(message_id: str, role: int, text: str, task_id: str, context_id: str) -> Message:
    return Message(
        message_id=message_id,
        role=role,  # type: ignore[arg-type]
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def question_text(pending: Sequence[InteractionPublic]) -> str:
    """What the run waits on, as a person or an agent of the run's tenant reads it."""
    lines = []
    for ia in pending:
        if ia.kind == "ask_user":
            lines.append(f"[{ia.id}] The agent asks: {ia.question}")
        else:
            lines.append(
                f"[{ia.id}] Approve {ia.tool} {json.dumps(ia.arguments)}? "
                f"(risk {ia.risk}, payload_hash {ia.payload_hash}, expires "
                f"{ia.expires_at.isoformat()}). Reply 'approve' or 'reject'."
            )
    return "\n".join(lines)


def task_of(
    run: RunRecord,
    pending: list[InteractionPublic],
    *,
    history_length: int | None = None,
    decided: Sequence[Interaction] = (),
    usage: TreeUsage | None = None,
) -> Task:
    """The Task for a run, its ids as the run's tenant knows them; `history_length` 0
    leaves the history out, and `decided` (the run's interactions that were answered, in
    order) puts each exchange in it."""
    task_id = in_view(run.tenant_id, run.id)
    context_id = in_view(run.tenant_id, run.session_id or run.id)
    state = RUN_STATE.get(run.status, TaskState.TASK_STATE_WORKING)
    status_message = None
    if pending and state not in TERMINAL_STATES:
        state = TaskState.TASK_STATE_INPUT_REQUIRED
        status_message = text_message(
            f"{task_id}-ask-{pending[0].id}",
            Role.ROLE_AGENT,
            question_text(pending),
            task_id,
            context_id,
        )
    elif state == TaskState.TASK_STATE_FAILED and run.error:
        status_message = text_message(
            f"{task_id}-error", Role.ROLE_AGENT, run.error, task_id, context_id
        )
    when = run.finished_at or run.started_at or run.created_at
    status = TaskStatus(state=state, timestamp=_stamp(when))
    if status_message is not None:
        status.message.CopyFrom(status_message)
    history = [text_message(f"{task_id}-input", Role.ROLE_USER, run.input, task_id, context_id)]
    for ia in decided:
        history += exchange(ia, task_id, context_id, run.tenant_id)
    if run.report:
        history.append(
            text_message(f"{task_id}-answer", Role.ROLE_AGENT, run.report, task_id, context_id)
        )
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    task = Task(id=task_id, context_id=context_id, status=status, history=history)
    if run.report and state == TaskState.TASK_STATE_COMPLETED:
        task.artifacts.append(report_artifact(run))
    # camelCase like every other key of the JSON binding.
    task.metadata.update(
        {"agent": run.agent, "stopReason": run.stop_reason or "", "steps": run.steps}
    )
    if usage is not None:
        # What the task cost: the run's and its sub-agent runs' recorded model calls.
        task.metadata.update(
            {
                "totalTokens": usage.total_tokens,
                "costUsd": usage.cost_usd,
                "runs": usage.runs,
            }
        )
    if run.coverage is not None:
        # What Keel's records show was read: a partial review says so here too.
        task.metadata.update(
            {
                "coverage": run.coverage.status,
                "filesCovered": run.coverage.files_covered,
                "filesTotal": run.coverage.files_total,
            }
        )
    return task


def exchange(ia: Interaction, task_id: str, context_id: str, tenant_id: str) -> list[Message]:
    """A decided interaction as the two messages of the task's conversation: what the
    agent asked (the status message it showed) and the follow-up that answered it."""
    shown = in_view(tenant_id, ia.id)
    asked = text_message(
        f"{task_id}-ask-{shown}",
        Role.ROLE_AGENT,
        question_text([InteractionPublic.from_interaction(task_id, ia, tenant_id=tenant_id)]),
        task_id,
        context_id,
    )
    reply = ia.answer or ia.decision or ""
    replied = text_message(f"{task_id}-reply-{shown}", Role.ROLE_USER, reply, task_id, context_id)
    return [asked, replied]


REPORT_FILENAME = "report.md"


def report_artifact(run: RunRecord) -> Artifact:
    """The final answer as Markdown; when it ended with a findings block, the findings as a
    data part beside it (`{"findings": [...]}`, docs/findings.md); and the answer again as
    a file (`report.md`, its UTF-8 bytes), for a client that saves or attaches files."""
    report = run.report or ""
    parts = [Part(text=report, media_type="text/markdown")]
    if run.findings is not None and (run.findings.findings or run.findings.error is None):
        # Keel's shape for any agent (docs/findings.md): the finding's own fields.
        data = {
            "findings": [
                f.model_dump(mode="json", include=FINDING_FIELDS) for f in run.findings.findings
            ]
        }
        parts.append(Part(data=ParseDict(data, Value()), media_type="application/json"))
    parts.append(
        Part(raw=report.encode("utf-8"), filename=REPORT_FILENAME, media_type="text/markdown")
    )
    return Artifact(
        artifact_id=f"{in_view(run.tenant_id, run.id)}-report",
        name="report",
        description=f"The {run.agent} agent's final answer.",
        parts=parts,
    )
