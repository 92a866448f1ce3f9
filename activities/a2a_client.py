"""Activities that talk A2A to other agents: send a task, then follow it to its end."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
from a2a.client import A2AClientError, ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from workflows.activity_refs import A2ADelegation
from workflows.coordination import DelegateHandle, DelegateInput, FollowInput
from workflows.findings import FINDINGS_LIST, Finding

CARD_PATH = "/.well-known/agent-card.json"
POLL_S = 1.0
STATE_NAMES = {
    TaskState.TASK_STATE_SUBMITTED: "submitted",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
FINISHED = {"completed", "failed", "canceled", "rejected", "input-required", "auth-required"}

# Given a URL, the tenant and the requester: the bearer token to send, or None.
TokenSource = Callable[[str, str, str], str | None]


class A2AClientActivities(A2ADelegation):
    """An A2A client as activities; tokens come from the worker, never from history."""

    def __init__(self, tokens: TokenSource) -> None:
        self._tokens = tokens

    @activity.defn(name="a2a_send")
    async def a2a_send(self, request: DelegateInput) -> DelegateHandle:
        async with self._client(request.url, request.tenant_id, request.requester) as (
            client,
            card,
        ):
            message = Message(
                message_id=request.message_id, role=Role.ROLE_USER, parts=[Part(text=request.text)]
            )
            send = SendMessageRequest(message=message)
            send.configuration.return_immediately = True
            try:
                responses = [r async for r in client.send_message(send)]
            except A2AClientError as exc:
                raise ApplicationError(f"{request.url} refused the task: {exc}") from exc
            tasks = [r.task for r in responses if r.HasField("task")]
            if not tasks:
                raise ApplicationError(
                    f"{request.url} answered with a message, not a task.", non_retryable=True
                )
            return _handle(request.url, card.name, _rpc_url(card, request.url), tasks[-1])

    @activity.defn(name="a2a_follow")
    async def a2a_follow(self, request: FollowInput) -> DelegateHandle:
        handle = request.handle
        deadline = time.monotonic() + request.deadline_s
        async with self._client(handle.url, request.tenant_id, request.requester) as (client, _):
            while True:
                activity.heartbeat(handle.task_id)
                try:
                    task = await client.get_task(GetTaskRequest(id=handle.task_id))
                except A2AClientError as exc:
                    raise ApplicationError(f"{handle.url} could not be asked: {exc}") from exc
                current = _handle(handle.url, handle.agent_name, handle.rpc_url, task)
                if current.state in FINISHED or time.monotonic() > deadline:
                    return current
                await asyncio.sleep(POLL_S)

    def _client(self, url: str, tenant_id: str, requester: str) -> Any:
        return _Connection(url, self._tokens(url, tenant_id, requester))


class _Connection:
    def __init__(self, url: str, token: str | None) -> None:
        self._url = url.rstrip("/")
        headers = {"A2A-Version": "1.0"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(headers=headers, timeout=30)
        self._client: Any = None

    async def __aenter__(self) -> tuple[Any, Any]:
        try:
            card_response = await self._http.get(self._url + CARD_PATH)
            card_response.raise_for_status()
            self._client = await create_client(
                self._url,
                ClientConfig(streaming=False, httpx_client=self._http),
                relative_card_path=CARD_PATH,
            )
        except (httpx.HTTPError, A2AClientError) as exc:
            await self._http.aclose()
            raise ApplicationError(f"No A2A agent answers at {self._url}: {exc}") from exc
        return self._client, self._client._card

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()
        await self._http.aclose()


def _rpc_url(card: Any, fallback: str) -> str:
    for interface in card.supported_interfaces:
        return str(interface.url)
    return fallback


def _handle(url: str, agent_name: str, rpc_url: str, task: Task) -> DelegateHandle:
    state = STATE_NAMES.get(task.status.state, "working")
    report = "\n\n".join(
        part.text for artifact in task.artifacts for part in artifact.parts if part.text
    )
    error = None
    if state != "completed" and task.status.HasField("message"):
        error = " ".join(p.text for p in task.status.message.parts if p.text) or None
    return DelegateHandle(
        url=url,
        rpc_url=rpc_url,
        task_id=task.id,
        agent_name=agent_name or url,
        state=state,
        report=report or None,
        error=error,
        findings=_findings(task),
    )


def _findings(task: Task) -> list[Finding] | None:
    """The findings of the task's data parts (`{"findings": [...]}`), Keel's shape; a data
    part of another shape is some other agent's data, not findings, and is left alone."""
    found: list[Finding] | None = None
    for artifact in task.artifacts:
        for part in artifact.parts:
            if not part.HasField("data"):
                continue
            data = MessageToDict(part.data)
            if not isinstance(data, dict) or "findings" not in data:
                continue
            try:
                found = (found or []) + FINDINGS_LIST.validate_python(data["findings"])
            except ValidationError:
                continue
    return found
