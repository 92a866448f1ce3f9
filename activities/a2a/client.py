"""Activities that talk A2A to other agents: send a task, then follow it to its end.

The agent's URL and every URL its card names are checked against the operator's
webhook target policy (`keel.activities.outbound.targets`) before anything is sent there, and
the connection goes to the addresses checked (`keel.activities.outbound.pinned_transport`): a client
chose the URL, and the card is the agent's to write. Keel's own API is exempt, so a
coordination of Keel's own agents works whatever the policy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.client import A2AClientError, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.credentials.user_tokens import (
    CredentialNeeded,
    CredentialRefused,
    UserTokens,
)
from keel.activities.outbound.pinned_transport import PinnedAddresses, pinned_transport
from keel.activities.outbound.targets import (
    Resolve,
    WebhookHostUnresolved,
    WebhookTargetPolicy,
    WebhookTargetRefused,
    check_webhook_target,
    resolve_host,
)
from keel.activities.outbound.url_prefix import url_within
from keel.activities.store.audit import AuditEntry, AuditLog
from keel.workflows.activity_refs import A2ADelegation
from keel.workflows.coordinator.models import DelegateHandle, DelegateInput, FollowInput
from keel.workflows.run.findings import FINDINGS_LIST, Finding

CARD_PATH = "/.well-known/agent-card.json"
POLL_S = 1.0
# How long a cancelled follow waits for the agent to take the task's cancel.
CANCEL_REMOTE_S = 10.0
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

    def __init__(
        self,
        tokens: TokenSource,
        *,
        targets: WebhookTargetPolicy | None = None,
        keel_urls: Sequence[str] = (),
        resolve: Resolve = resolve_host,
        audit: AuditLog | None = None,
        user_tokens: UserTokens | None = None,
    ) -> None:
        self._tokens = tokens
        self._user_tokens = user_tokens
        self._targets = targets or WebhookTargetPolicy()
        self._keel_urls = list(keel_urls)
        self._resolve = resolve
        self._audit = audit

    @activity.defn(name="a2a_send")
    async def a2a_send(self, request: DelegateInput) -> DelegateHandle:
        async with self._client(
            request.url, request.tenant_id, request.requester, request.message_id
        ) as (client, card):
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
        # The remote agent chose the task id: the coordination's own id makes it Keel's.
        subject = f"{activity.info().workflow_id}/{handle.task_id}"
        connection = self._client(handle.url, request.tenant_id, request.requester, subject)
        async with connection as (client, _):
            try:
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
            except asyncio.CancelledError:
                # The coordination was cancelled (or has gone): the agent's task need not go on.
                await _cancel_remote(client, handle)
                raise

    def _client(self, url: str, tenant_id: str, requester: str, subject: str) -> Any:
        """A connection to the agent at `url`; `subject` names the call in the audit log."""
        pins = PinnedAddresses()

        async def allow(target: str) -> None:
            await self._allow(target, pins, tenant_id, subject)

        async def token() -> str | None:
            if self._user_tokens is None or not self._user_tokens.as_user(url):
                return self._tokens(url, tenant_id, requester)
            try:  # an agent called as the user gets the requester's own token
                return await self._user_tokens.bearer(url, tenant_id, requester)
            except CredentialNeeded as need:
                raise ApplicationError(
                    f"The A2A agent at {need.backend} is called as the user, and "
                    f"{requester} has no credential for it: {need.prompt} A run of an agent "
                    "that uses it as an MCP server asks for one.",
                    type="CredentialNeeded",
                    non_retryable=True,
                ) from None
            except CredentialRefused as exc:
                raise ApplicationError(
                    str(exc), type="CredentialRefused", non_retryable=not exc.retryable
                ) from None

        return _Connection(url, token, pins, allow)

    async def _allow(self, url: str, pins: PinnedAddresses, tenant_id: str, subject: str) -> None:
        """Pin `url`'s checked addresses, or raise its refusal as a final failure, audited."""
        if any(url_within(url, mine) for mine in self._keel_urls):
            # Keel's own API: reached by its name, as the operator configured it.
            pins.pin(url, [httpx.URL(url).raw_host.decode("ascii")])
            return
        try:
            addresses = await check_webhook_target(
                url, self._targets, self._resolve, what="A2A agent"
            )
        except WebhookHostUnresolved as exc:
            raise ApplicationError(f"{exc} Retrying.", type="A2AUnreachable") from None
        except WebhookTargetRefused as exc:
            if self._audit is not None:
                # Once per call, however often Temporal retries it.
                await self._audit.append_once(
                    AuditEntry(
                        tenant_id=tenant_id,
                        actor="system",
                        category="webhook",
                        action="coordination.target_refused",
                        severity="warning",
                        subject=subject,
                        # Only the host: a URL's path or query may hold a token.
                        detail={
                            "host": urlsplit(url).hostname or "",
                            "reason": str(exc),
                            "at": "call",
                        },
                    )
                )
            raise ApplicationError(str(exc), type="A2ATargetRefused", non_retryable=True) from None
        pins.pin(url, addresses)


class _Connection:
    def __init__(
        self,
        url: str,
        token: Callable[[], Awaitable[str | None]],
        pins: PinnedAddresses,
        allow: Callable[[str], Awaitable[None]],
    ) -> None:
        self._url = url.rstrip("/")
        self._allow = allow
        self._token = token
        headers = {"A2A-Version": "1.0"}
        self._http = httpx.AsyncClient(
            headers=headers, timeout=30, transport=pinned_transport(pins)
        )
        self._client: Any = None

    async def __aenter__(self) -> tuple[Any, Any]:
        try:
            token = await self._token()
            if token:
                self._http.headers["authorization"] = f"Bearer {token}"
            await self._allow(self._url)
            card_response = await self._http.get(self._url + CARD_PATH)
            card_response.raise_for_status()
            self._client = await create_client(
                self._url,
                ClientConfig(streaming=False, httpx_client=self._http),
                relative_card_path=CARD_PATH,
            )
            card = self._client._card
            # The card says where to post: checked like the URL the client gave.
            for interface in card.supported_interfaces:
                if str(interface.url).startswith(("http://", "https://")):
                    await self._allow(str(interface.url))
        except (httpx.HTTPError, A2AClientError) as exc:
            await self._close()
            raise ApplicationError(f"No A2A agent answers at {self._url}: {exc}") from exc
        except BaseException:
            await self._close()
            raise
        return self._client, card

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def _close(self) -> None:
        if self._client is not None:
            await self._client.close()
        await self._http.aclose()


async def _cancel_remote(client: Any, handle: DelegateHandle) -> None:
    """Ask the agent to cancel the task; an agent that cannot is left to finish it."""
    try:
        await asyncio.wait_for(
            client.cancel_task(CancelTaskRequest(id=handle.task_id)), CANCEL_REMOTE_S
        )
    except (A2AClientError, httpx.HTTPError, TimeoutError) as exc:
        activity.logger.warning("%s did not cancel task %s: %s", handle.url, handle.task_id, exc)


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
