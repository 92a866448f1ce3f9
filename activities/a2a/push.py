"""A run's webhook notice as an A2A push notification: a task status update.

An A2A client that set a push notification config reads what its streams would carry,
a `StreamResponse` holding a `statusUpdate` (taskId, contextId, status), so it needs no
Keel-specific parser. The Keel notice itself rides along in the update's `metadata.keel`
(what the run waits on, with payload hashes; the report's first characters), and the
request is signed exactly like every Keel webhook.
"""

from __future__ import annotations

import json
from typing import Any

from a2a.types import (
    Message,
    Part,
    Role,
    StreamResponse,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict

from keel.workflows.webhooks.models import WebhookNotice

# The spec's header for the token a client gave in its config, to check the sender.
A2A_TOKEN_HEADER = "X-A2A-Notification-Token"
NOTICE_STATE = {
    "waiting": TaskState.TASK_STATE_INPUT_REQUIRED,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}


def a2a_push_body(notice: WebhookNotice) -> bytes:
    """The JSON body of the A2A push for `notice` (the task is the run)."""
    context_id = notice.session_id or notice.run_id
    status = TaskStatus(state=NOTICE_STATE.get(notice.status, TaskState.TASK_STATE_WORKING))
    status.timestamp.FromDatetime(notice.occurred_at)
    text = _status_text(notice)
    if text:
        status.message.CopyFrom(
            Message(
                message_id=f"{notice.run_id}-push-{notice.id.rpartition('/')[2]}",
                role=Role.ROLE_AGENT,
                parts=[Part(text=text)],
                task_id=notice.run_id,
                context_id=context_id,
            )
        )
    update = TaskStatusUpdateEvent(task_id=notice.run_id, context_id=context_id, status=status)
    update.metadata.update({"keel": json.loads(notice.model_dump_json())})
    data: dict[str, Any] = MessageToDict(StreamResponse(status_update=update))
    return json.dumps(data, separators=(",", ":")).encode()


def _status_text(notice: WebhookNotice) -> str:
    if notice.status == "waiting":
        return "\n".join(
            f"[{i.id}] The agent asks: {i.question}"
            if i.kind == "ask_user"
            else f"[{i.id}] Approve {i.tool} {i.subject} (risk {i.risk}, payload_hash "
            f"{i.payload_hash}, expires {i.expires_at.isoformat()})?"
            for i in notice.interactions
        )
    if notice.status == "failed":
        return notice.error or ""
    return notice.report_preview
