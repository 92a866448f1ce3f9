"""A2A's HTTP+JSON binding, driven by the a2a-sdk's client over that transport: the same
handler, authentication and tenancy as JSON-RPC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Role,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import TaskNotFoundError

from keel.worker.scripted.llm import Script, Turn
from tests.integration.keel_http import ALICE, MALLORY, LaunchKeel, base_url
from tests.integration.test_a2a import user_message


@asynccontextmanager
async def rest_client(
    url: str, headers: dict[str, str], agent: str, *, streaming: bool = False
) -> AsyncIterator[Any]:
    http = httpx.AsyncClient(headers={**headers, "A2A-Version": "1.0"}, timeout=60)
    client = await create_client(
        f"{url}/a2a/{agent}",
        ClientConfig(
            streaming=streaming,
            httpx_client=http,
            supported_protocol_bindings=[TransportProtocol.HTTP_JSON],
        ),
        relative_card_path="/.well-known/agent-card.json",
    )
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


async def test_the_http_json_binding_sends_gets_and_lists_tasks(keel_app: LaunchKeel) -> None:
    async with keel_app(Script(turns=[Turn(content="All good.")]), headers={}) as http:
        url = base_url(http)
        async with (
            rest_client(url, ALICE, "review") as alice,
            rest_client(url, MALLORY, "review") as mallory,
            rest_client(url, ALICE, "review", streaming=True) as streaming,
        ):
            card = (await http.get(f"{url}/a2a/review/.well-known/agent-card.json")).json()
            bindings = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
            assert bindings["HTTP+JSON"] == f"{url}/a2a/review/rest"
            # The v0.3 card names only what v0.3 clients speak.
            legacy = (await http.get(f"{url}/a2a/review/.well-known/agent.json")).json()
            assert "HTTP+JSON" not in str(legacy)
            # No token: the binding's 401, before the SDK sees the request.
            bare = await http.post(f"{url}/a2a/review/rest/message:send", json={})
            assert bare.status_code == 401
            assert bare.json()["error"]["status"] == "UNAUTHENTICATED"
            unknown = await http.get(f"{url}/a2a/nobody/rest/tasks", headers=ALICE)
            assert unknown.status_code == 404 and "No agent nobody" in unknown.text
            listed_raw = await http.get(
                f"{url}/a2a/review/rest/tasks", headers={**ALICE, "A2A-Version": "1.0"}
            )
            assert listed_raw.status_code == 200
            # The binding's protocol requirements (spec 11.1) name application/json.
            assert listed_raw.headers["content-type"] == "application/json"

            [response] = [r async for r in alice.send_message(user_message("Review the code"))]
            task = response.task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            [artifact] = task.artifacts
            assert artifact.parts[0].text == "All good."
            fetched = await alice.get_task(GetTaskRequest(id=task.id, history_length=1))
            assert [m.role for m in fetched.history] == [Role.ROLE_AGENT]
            listed = await alice.list_tasks(ListTasksRequest(context_id=task.context_id))
            assert [t.id for t in listed.tasks] == [task.id]

            # Another tenant's task is no task, as over JSON-RPC.
            with pytest.raises(TaskNotFoundError):
                await mallory.get_task(GetTaskRequest(id=task.id))
            assert (
                await mallory.list_tasks(ListTasksRequest(context_id=task.context_id))
            ).tasks == []
            # message:stream, as server-sent events: the task, then its updates to the end.
            events = [e async for e in streaming.send_message(user_message("Review it again"))]
            assert events[0].HasField("task")
            last = events[-1]
            final = (
                last.status_update.status if last.HasField("status_update") else last.task.status
            )
            assert final.state == TaskState.TASK_STATE_COMPLETED
