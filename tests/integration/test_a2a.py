"""A2A over HTTP: the a2a-sdk client drives Keel agents; v0.3 and v0.1 names; errors."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from temporalio.client import Client as TemporalClient

from keel.activities.store.run_store import Store
from keel.activities.webhooks.signature import verify_signature
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from tests.conftest import auth_headers
from tests.integration.keel_http import base_url, keel_api
from tests.integration.test_schedules import Receiver, eventually

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
ALICE = auth_headers("default", "alice")
MALLORY = auth_headers("other-tenant", "mallory")


@asynccontextmanager
async def keel(
    temporal_client: TemporalClient, store: Store, settings: Settings
) -> AsyncIterator[str]:
    async with keel_api(temporal_client, store, settings) as http:
        yield base_url(http)


@asynccontextmanager
async def a2a_client(url: str, *, streaming: bool, agent: str | None = None) -> AsyncIterator[Any]:
    http = httpx.AsyncClient(headers={**ALICE, "A2A-Version": "1.0"}, timeout=60)
    base = f"{url}/a2a/{agent}" if agent else url
    card_path = "/.well-known/agent-card.json"
    client = await create_client(
        base, ClientConfig(streaming=streaming, httpx_client=http), relative_card_path=card_path
    )
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


def user_message(text: str, **fields: Any) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=f"m-{text[:8]}", role=Role.ROLE_USER, parts=[Part(text=text)], **fields
        )
    )


async def rpc(
    url: str,
    body: Any,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=60) as http:
        raw = body if isinstance(body, (bytes, str)) else None
        response = await http.post(
            f"{url}/a2a",
            content=raw if raw is not None else None,
            json=None if raw is not None else body,
            headers={**(headers or ALICE), "content-type": content_type},
        )
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        # A streaming method answers in SSE, errors included: take the first event.
        first = next(line for line in response.text.splitlines() if line.startswith("data:"))
        streamed: dict[str, Any] = json.loads(first.removeprefix("data:"))
        return streamed
    data: dict[str, Any] = response.json()
    return data


async def test_agent_card_lists_a_skill_per_agent(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="x")]))
    settings = settings_for(llm, workspace, api_port=free_port())
    async with keel(temporal_client, store, settings) as url, httpx.AsyncClient() as http:
        card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
        assert {s["id"] for s in card["skills"]} >= {"review", "investigate", "explore", "build"}
        interfaces = {
            (i["protocolBinding"], i["url"], i["protocolVersion"])
            for i in card["supportedInterfaces"]
        }
        assert interfaces == {
            ("JSONRPC", f"{url}/a2a", "1.0"),
            ("JSONRPC", f"{url}/a2a", "0.3"),
            ("HTTP+JSON", f"{url}/a2a/rest", "1.0"),
        }
        assert card["capabilities"]["streaming"] is True
        assert "bearer" in card["securitySchemes"]
        assert card["url"] == f"{url}/a2a" and card["protocolVersion"]  # the v0.3 fields too
        legacy = (await http.get(f"{url}/.well-known/agent.json")).json()
        assert legacy["url"] == f"{url}/a2a" and legacy["securitySchemes"]["bearer"]
        one = (await http.get(f"{url}/a2a/review/.well-known/agent-card.json")).json()
        assert [s["id"] for s in one["skills"]] == ["review"]
        # An agent's own card is the pure v1.0 shape (strict v1.0 schemas refuse extra
        # keys); its v0.3 shape is beside it.
        assert not {"url", "protocolVersion", "preferredTransport", "security"} & set(one)
        one_v03 = (await http.get(f"{url}/a2a/review/.well-known/agent.json")).json()
        assert one_v03["url"] == f"{url}/a2a/review" and one_v03["protocolVersion"]
        assert "text/plain" in card["defaultInputModes"]
        assert (await http.get(f"{url}/a2a/nope/.well-known/agent-card.json")).status_code == 404


async def test_send_get_and_list_a_blocking_task(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"})
                    ]
                ),
                Turn(content="## Review\n{files_read}"),
            ]
        )
    )
    settings = settings_for(llm, workspace, api_port=free_port())
    async with (
        keel(temporal_client, store, settings) as url,
        a2a_client(url, streaming=False) as client,
    ):
        [response] = [r async for r in client.send_message(user_message("Review the code"))]
        task = response.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        [artifact] = task.artifacts
        assert "- pkg/core.py" in artifact.parts[0].text
        # The same report as a file, for clients that save or attach files.
        report_file = artifact.parts[-1]
        assert (report_file.filename, report_file.media_type) == ("report.md", "text/markdown")
        assert report_file.raw.decode("utf-8") == artifact.parts[0].text
        assert task.context_id

        fetched = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
        assert len(fetched.history) == 1 and fetched.history[0].role == Role.ROLE_AGENT
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [task.id]


SEPARATORS = "one\u2028two\u2029three\x85four"
"""Line separators JSON keeps raw and `str.splitlines` (httpx's `aiter_lines`) splits on."""


async def test_streams_carrying_unicode_line_separators_reach_line_reading_clients_whole(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    """The a2a-sdk client and the REST event stream read SSE with `aiter_lines`: an answer,
    a message or a task id with U+2028, U+2029 or U+0085 in it must not cut a JSON line."""
    llm = scripted(Script(turns=[Turn(content=f"Answer: {SEPARATORS}")]))
    settings = settings_for(llm, workspace, api_port=free_port())
    async with (
        keel(temporal_client, store, settings) as url,
        a2a_client(url, streaming=True) as client,
    ):
        events = [e async for e in client.send_message(user_message(f"Ask: {SEPARATORS}"))]
        task_id = events[0].task.id
        assert events[0].task.history[0].parts[0].text == f"Ask: {SEPARATORS}"
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.artifacts[0].parts[0].text == f"Answer: {SEPARATORS}"

        async with httpx.AsyncClient(base_url=url, headers=ALICE, timeout=60) as http:
            # The request the protocol fuzz found: a v0.3 resubscribe to a task id "\x85".
            body = {"jsonrpc": "2.0", "id": 3, "method": "tasks/resubscribe"}
            async with http.stream(
                "POST", "/a2a", json={**body, "params": {"id": "\x85"}}
            ) as response:
                lines = [line async for line in response.aiter_lines() if line]
            [answer] = [json.loads(line.removeprefix("data:")) for line in lines]
            assert answer["error"]["code"] == -32001 and "\x85" in answer["error"]["message"]

            async with http.stream("GET", f"/v1/runs/{task_id}/events/stream") as response:
                data = [
                    json.loads(line.removeprefix("data: "))
                    async for line in response.aiter_lines()
                    if line.startswith("data:")
                ]
            [message] = [d for d in data if d["type"] == "message"]
            assert message["data"]["content"] == f"Answer: {SEPARATORS}"


async def test_stream_input_required_answered_by_a_follow_up(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(
                            name="write_file", arguments={"path": "NOTES.md", "content": "hi\n"}
                        )
                    ]
                ),
                Turn(content="Wrote NOTES.md."),
            ]
        )
    )
    settings = settings_for(llm, workspace, api_port=free_port())
    async with (
        keel(temporal_client, store, settings) as url,
        a2a_client(url, streaming=True, agent="build") as client,
    ):
        events = [e async for e in client.send_message(user_message("Add notes"))]
        assert events[0].HasField("task")
        last = events[-1]
        state = last.status_update.status if last.HasField("status_update") else last.task.status
        assert state.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "write_file" in state.message.parts[0].text
        task_id = events[0].task.id
        context_id = events[0].task.context_id
        assert not (workspace / "NOTES.md").exists()

        follow = user_message("approve", task_id=task_id)
        answered = [e async for e in client.send_message(follow)]
        final = answered[-1]
        status = (
            final.status_update.status if final.HasField("status_update") else final.task.status
        )
        assert status.state == TaskState.TASK_STATE_COMPLETED
        # The report comes as an artifact update, or inside the Task when the run was
        # already done by the time the stream began.
        artifacts = [e.artifact_update.artifact for e in answered if e.HasField("artifact_update")]
        artifacts += [a for e in answered if e.HasField("task") for a in e.task.artifacts]
        assert artifacts and artifacts[0].parts[0].text == "Wrote NOTES.md."
        assert (workspace / "NOTES.md").read_text() == "hi\n"
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.context_id == context_id  # the follow-up kept the task's context


async def test_cancel_a_working_task_and_not_a_finished_one(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="slow", delay_s=5.0)]))
    # A model with no fast calls on record: its first call goes through the server,
    # which hands the cancellation over at once.
    settings = settings_for(llm, workspace, api_port=free_port(), model="scripted-unhurried")
    async with (
        keel(temporal_client, store, settings) as url,
        a2a_client(url, streaming=False) as client,
    ):
        request = user_message("take your time")
        request.configuration.return_immediately = True
        [response] = [r async for r in client.send_message(request)]
        task_id = response.task.id
        assert response.task.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        again = await rpc(
            url,
            {"jsonrpc": "2.0", "id": 9, "method": "CancelTask", "params": {"id": task_id}},
            headers={**ALICE, "A2A-Version": "1.0"},
        )
        assert again["error"]["code"] == -32002
        sub = await rpc(
            url,
            {"jsonrpc": "2.0", "id": 10, "method": "tasks/resubscribe", "params": {"id": task_id}},
        )
        assert sub["error"]["code"] == -32004


async def test_v03_and_v01_clients(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="hello from keel")]))
    settings = settings_for(llm, workspace, api_port=free_port())
    async with keel(temporal_client, store, settings) as url:
        v03 = await rpc(
            url,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {
                    "message": {
                        "kind": "message",
                        "messageId": "a",
                        "role": "user",
                        "parts": [{"kind": "text", "text": "hi"}],
                    }
                },
            },
        )
        result = v03["result"]
        assert result["kind"] == "task" and result["status"]["state"] == "completed"
        assert result["artifacts"][0]["parts"][0]["text"] == "hello from keel"
        assert result["artifacts"][0]["parts"][-1] == {
            "kind": "file",
            "file": {
                "bytes": base64.b64encode(b"hello from keel").decode(),
                "mimeType": "text/markdown",
                "name": "report.md",
            },
        }
        got = await rpc(
            url, {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": result["id"]}}
        )
        assert got["result"]["id"] == result["id"]

        v01 = await rpc(
            url,
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tasks/send",
                "params": {
                    "id": "client-chosen",
                    "message": {"role": "user", "parts": [{"type": "text", "text": "hi again"}]},
                },
            },
        )
        assert v01["result"]["status"]["state"] == "completed", v01


async def test_protocol_errors_change_nothing(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="only once")]))
    settings = settings_for(llm, workspace, api_port=free_port())
    async with keel(temporal_client, store, settings) as url:
        done = await rpc(
            url,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "go"}]}
                },
            },
            headers={**ALICE, "A2A-Version": "1.0"},
        )
        task_id = done["result"]["task"]["id"]
        # Metadata keys are camelCase like the rest of the JSON binding.
        assert "stopReason" in done["result"]["task"]["metadata"]
        async with httpx.AsyncClient() as http:
            slash = await http.post(  # a client joining "/" to the interface URL
                f"{url}/a2a/",
                json={"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": task_id}},
                headers={**ALICE, "A2A-Version": "1.0"},
            )
        assert slash.json()["result"]["id"] == task_id

        assert (await rpc(url, b"{not json"))["error"]["code"] == -32700
        batch = await rpc(url, [{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}])
        assert batch["error"]["code"] == -32600
        unknown = await rpc(url, {"jsonrpc": "2.0", "id": 2, "method": "tasks/explode"})
        assert unknown["error"]["code"] == -32601
        missing = await rpc(
            url, {"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"nothing": True}}
        )
        assert missing["error"]["code"] == -32602
        theirs = await rpc(
            url,
            {"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": task_id}},
            headers={**MALLORY, "A2A-Version": "1.0"},
        )
        assert theirs["error"]["code"] == -32001
        not_found = await rpc(
            url,
            {"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": "run-nope"}},
            headers={**ALICE, "A2A-Version": "1.0"},
        )
        assert not_found["error"]["code"] == -32001
        bad_id = await rpc(
            url, {"jsonrpc": "2.0", "id": {"bad": "type"}, "method": "message/send", "params": {}}
        )
        assert bad_id["error"]["code"] == -32600  # the request is invalid, not its params
        file_part = {"raw": "dGNr", "mediaType": "application/x-unknown"}
        unsupported = await rpc(
            url,
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "SendMessage",
                "params": {
                    "message": {"messageId": "y", "role": "ROLE_USER", "parts": [file_part]}
                },
            },
            headers={**ALICE, "A2A-Version": "1.0"},
        )
        assert unsupported["error"]["code"] == -32005
        wrong_type = await rpc(url, b'{"jsonrpc": "2.0"}', content_type="text/plain")
        assert wrong_type["error"]["code"] == -32005
        async with httpx.AsyncClient() as http:
            anonymous = await http.post(
                f"{url}/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}
            )
        assert anonymous.status_code == 401
    assert llm.total_requests == 1
    await asyncio.sleep(0)


async def test_get_task_answers_while_the_worker_is_down_and_after_it_returns(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    import signal
    import subprocess
    import sys

    from tests.integration.test_durability import worker_env

    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(
                            name="write_file", arguments={"path": "OUT.md", "content": "x"}
                        )
                    ]
                ),
                Turn(content="done"),
            ]
        )
    )
    settings = settings_for(llm, workspace, api_port=free_port())

    def spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "keel.api.cli.main", "worker"],
            env=worker_env(settings),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    worker = spawn()
    try:
        # The API alone: the worker is a `keel worker` process, killed and replaced.
        async with (
            keel_api(temporal_client, store, settings, worker=False) as http,
            a2a_client(base_url(http), streaming=False, agent="build") as client,
        ):
            [response] = [r async for r in client.send_message(user_message("write it"))]
            task_id = response.task.id
            assert response.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            down = await asyncio.wait_for(client.get_task(GetTaskRequest(id=task_id)), 20)
            assert down.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert "OUT.md" in down.status.message.parts[0].text
            worker = spawn()
            [after] = [
                r async for r in client.send_message(user_message("approve", task_id=task_id))
            ]
            assert after.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert (workspace / "OUT.md").read_text() == "x"
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait()


async def test_card_declares_no_security_when_auth_is_off(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="x")]))
    settings = settings_for(
        llm, workspace, api_port=free_port(), auth_mode="off", a2a_default_agent="investigate"
    )
    async with keel(temporal_client, store, settings) as url, httpx.AsyncClient() as http:
        card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
        assert "securitySchemes" not in card and "security" not in card
        done = await rpc(
            url,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {"messageId": "z", "role": "ROLE_USER", "parts": [{"text": "q"}]}
                },
            },
            headers={"A2A-Version": "1.0"},
        )
        assert done["result"]["task"]["metadata"]["agent"] == "investigate"


async def test_subscription_outlasts_input_required_and_ends_at_a_terminal_state(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[ScriptedToolCall(name="ask_user", arguments={"question": "Who?"})]
                ),
                Turn(content="Done."),
            ]
        )
    )
    settings = asker(workspace, settings_for(llm, workspace, api_port=free_port()))
    async with (
        keel(temporal_client, store, settings) as url,
        a2a_client(url, streaming=True, agent="asker") as client,
    ):
        first = [e async for e in client.send_message(user_message("start"))]
        task_id = first[0].task.id
        waiting = await client.get_task(GetTaskRequest(id=task_id))
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        async def answer() -> None:
            await asyncio.sleep(0.5)
            async with a2a_client(url, streaming=False, agent="asker") as other:
                _ = [e async for e in other.send_message(user_message("me", task_id=task_id))]

        answering = asyncio.create_task(answer())
        events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id))]
        await answering
        assert events[0].HasField("task")
        last = events[-1]
        state = last.status_update.status if last.HasField("status_update") else last.task.status
        assert state.state == TaskState.TASK_STATE_COMPLETED


def asker(workspace: Path, settings: Settings) -> Settings:
    """Settings with an `asker` agent, which may only ask the user."""
    agents = workspace / "agents"
    agents.mkdir(exist_ok=True)
    (agents / "asker.md").write_text(
        "---\nname: asker\ntools: [ask_user]\n---\nAsk, then answer.\n"
    )
    return settings.model_copy(update={"agents_dir": agents})


async def test_history_holds_every_follow_up_in_order(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    """As the kit's CORE-HIST-005/006 do: a task that asks twice, answered twice, then done."""
    ask = [
        Turn(tool_calls=[ScriptedToolCall(name="ask_user", arguments={"question": q})])
        for q in ("Which module?", "Which function?")
    ]
    llm = scripted(Script(turns=[*ask, Turn(content="Both answers noted.")]))
    settings = asker(workspace, settings_for(llm, workspace, api_port=free_port()))
    async with (
        keel(temporal_client, store, settings) as url,
        a2a_client(url, streaming=False, agent="asker") as client,
    ):
        [first] = [r async for r in client.send_message(user_message("Start here"))]
        task_id = first.task.id
        assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        for reply in ("The pkg module", "The add function"):
            _ = [r async for r in client.send_message(user_message(reply, task_id=task_id))]
        task = await client.get_task(GetTaskRequest(id=task_id, history_length=10))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        said = [(m.role, m.parts[0].text) for m in task.history]
        assert [text for role, text in said if role == Role.ROLE_USER] == [
            "Start here",
            "The pkg module",
            "The add function",
        ]
        assert said[-1] == (Role.ROLE_AGENT, "Both answers noted.")
        questions = [t for role, t in said if role == Role.ROLE_AGENT and "asks" in t]
        assert ["Which module?" in questions[0], "Which function?" in questions[1]] == [True] * 2
        # Question, answer, question, answer between the input and the report, in order.
        assert [role for role, _ in said] == [Role.ROLE_USER] + [
            Role.ROLE_AGENT,
            Role.ROLE_USER,
        ] * 2 + [Role.ROLE_AGENT]
        assert len({m.message_id for m in task.history}) == len(task.history)
        last_two = await client.get_task(GetTaskRequest(id=task_id, history_length=2))
        assert [m.parts[0].text for m in last_two.history] == [
            "The add function",
            "Both answers noted.",
        ]


async def test_cards_carry_cache_validators_and_answer_304(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="x")]))
    settings = settings_for(llm, workspace, api_port=free_port())
    paths = (
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
        "/a2a/review/.well-known/agent-card.json",
        "/a2a/review/.well-known/agent.json",
    )
    async with (
        keel(temporal_client, store, settings) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        tags = set()
        for path in paths:
            card = await http.get(path)
            assert card.status_code == 200 and card.json()["name"]
            tag = card.headers["etag"]
            assert tag.startswith('"') and card.headers["cache-control"] == "public, max-age=300"
            modified = card.headers["last-modified"]
            assert modified.endswith(" GMT")
            assert (await http.get(path)).headers["etag"] == tag  # the same card, the same tag
            tags.add(tag)

            again = await http.get(path, headers={"if-none-match": tag})
            assert again.status_code == 304 and again.content == b""
            assert again.headers["etag"] == tag
            listed = await http.get(path, headers={"if-none-match": f'"other", W/{tag}'})
            assert listed.status_code == 304
            changed = await http.get(path, headers={"if-none-match": '"stale"'})
            assert changed.status_code == 200 and changed.json() == card.json()
            since = await http.get(path, headers={"if-modified-since": modified})
            assert since.status_code == 304
            older = await http.get(
                path, headers={"if-modified-since": "Mon, 01 Jan 2001 00:00:00 GMT"}
            )
            assert older.status_code == 200
        assert len(tags) == len(paths)  # each shape is its own document


async def test_a_v03_part_without_kind_is_refused(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="x")]))
    settings = settings_for(llm, workspace, api_port=free_port())

    def send(part: dict[str, Any]) -> dict[str, Any]:
        message = {"role": "user", "messageId": "m-kind", "kind": "message", "parts": [part]}
        return {"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": message}}

    async with keel(temporal_client, store, settings) as url:
        missing = await rpc(url, send({"text": "Review it"}))
        assert missing["id"] == 7 and missing["error"]["code"] == -32602
        assert "parts[0].kind is missing" in missing["error"]["message"]
        unknown = await rpc(url, send({"kind": "image", "text": "Review it"}))
        assert unknown["error"]["code"] == -32602 and "'image'" in unknown["error"]["message"]
        assert llm.total_requests == 0  # nothing started
        # v0.1's `tasks/send` has `type`, not `kind`, and stays accepted.
        v01 = {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tasks/send",
            "params": {"message": {"role": "user", "parts": [{"type": "text", "text": "Hi"}]}},
        }
        assert "result" in await rpc(url, v01)


async def test_push_notifications_arrive_signed_through_an_approval_wait_and_the_end(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    write = ScriptedToolCall(name="write_file", arguments={"path": "NOTES.md", "content": "hi\n"})
    llm = scripted(Script(turns=[Turn(tool_calls=[write]), Turn(content="Wrote NOTES.md.")]))
    settings = settings_for(llm, workspace, api_port=free_port())
    with Receiver() as receiver:
        async with (
            keel(temporal_client, store, settings) as url,
            a2a_client(url, streaming=False, agent="build") as client,
        ):
            async with httpx.AsyncClient() as http:
                card = (await http.get(f"{url}/a2a/build/.well-known/agent-card.json")).json()
            assert card["capabilities"]["pushNotifications"] is True
            # The config travels with the message that creates the task.
            send = user_message("Add notes")
            send.configuration.task_push_notification_config.CopyFrom(
                TaskPushNotificationConfig(
                    id="ci",
                    url=receiver.url,
                    token="tok-ci",
                    authentication=AuthenticationInfo(scheme="Bearer", credentials="s3cret"),
                )
            )
            [first] = [r async for r in client.send_message(send)]
            task_id = first.task.id
            assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

            async def pushed(state: str) -> tuple[dict[str, str], bytes] | None:
                for headers, body in list(receiver.received):
                    update = json.loads(body)["statusUpdate"]
                    if update["status"]["state"] == state:
                        return headers, body
                return None

            headers, body = await eventually(
                lambda: pushed("TASK_STATE_INPUT_REQUIRED"), "the approval wait pushed"
            )
            async with httpx.AsyncClient(base_url=url, headers=ALICE) as http:
                secret = (await http.get("/v1/webhooks/signing-secret")).json()["secret"]
            assert verify_signature(secret, headers["x-keel-signature"], body)
            assert headers["x-a2a-notification-token"] == "tok-ci"
            assert headers["authorization"] == "Bearer s3cret"
            waiting = json.loads(body)["statusUpdate"]
            assert waiting["taskId"] == task_id and waiting["contextId"] == first.task.context_id
            assert "write_file" in waiting["status"]["message"]["parts"][0]["text"]
            [ia] = waiting["metadata"]["keel"]["interactions"]
            assert ia["tool"] == "write_file" and ia["payload_hash"]

            # The client manages its configs: get, list, add another, delete it.
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="ci")
            )
            assert got.url == receiver.url and got.token == "tok-ci"
            # The scheme is shown, the credentials are not read back.
            assert got.authentication.scheme == "Bearer" and not got.authentication.credentials
            second = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task_id, url=f"{receiver.url}/2")
            )
            assert second.id == task_id  # no id given: the task's, as the a2a-sdk's stores do
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            assert {c.id for c in listed.configs} == {"ci", second.id}
            for _ in range(2):  # deleting again is no error
                await client.delete_task_push_notification_config(
                    DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=second.id)
                )
            with pytest.raises(TaskNotFoundError, match="has no push notification config"):
                await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task_id, id=second.id)
                )

            # Another tenant neither sees the task's configs nor adds one.
            async with httpx.AsyncClient(timeout=30) as http:
                theirs = await http.post(
                    f"{url}/a2a/build",
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "ListTaskPushNotificationConfigs",
                        "params": {"taskId": task_id},
                    },
                    headers={**MALLORY, "A2A-Version": "1.0"},
                )
            assert theirs.json()["error"]["code"] == -32001

            _ = [r async for r in client.send_message(user_message("approve", task_id=task_id))]
            headers, body = await eventually(
                lambda: pushed("TASK_STATE_COMPLETED"), "the completion pushed"
            )
            assert verify_signature(secret, headers["x-keel-signature"], body)
            done = json.loads(body)["statusUpdate"]
            assert done["status"]["message"]["parts"][0]["text"] == "Wrote NOTES.md."
            # Only the config that was kept was told; the deleted one never was.
            assert {h.get("x-a2a-notification-token") for h, _ in receiver.received} == {"tok-ci"}
