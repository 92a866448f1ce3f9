"""The LangGraph-compatible API, driven by the real `langgraph-sdk` client against a running
Keel (Temporal dev server, Postgres, a worker, the scripted model over HTTP)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError
from langgraph_sdk.schema import Command

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.conftest import token_for
from tests.integration.keel_http import LaunchKeel, MakeSettings, StartLLM, base_url, eventually
from tests.integration.test_approvals import executions, write
from tests.integration.test_durability import (  # noqa: F401 (spawn_worker is a fixture)
    spawn_worker,
    wait_until,
)

HUMAN = {"role": "user", "content": "What does the project do?"}


def client_for(url: str, tenant: str, sub: str) -> LangGraphClient:
    """The SDK as a front end builds it: the Keel token is its API key."""
    return get_client(url=f"{url}/langgraph", api_key=token_for(tenant, sub))


def langgraph(
    http: httpx.AsyncClient, sub: str = "alice", tenant: str = "default"
) -> LangGraphClient:
    """The SDK on the running Keel `http` talks to, for `sub` in `tenant`."""
    return client_for(base_url(http), tenant, sub)


def text_of(values: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["type"], m["content"]) for m in values["messages"]]


async def test_chat_on_a_thread_with_wait_and_token_streaming(
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(content="The project adds numbers."),
                Turn(content="It has one function, add, in pkg/core.py.", stream_pause_s=0.02),
            ]
        )
    )
    async with keel_app(llm) as http:
        lg = langgraph(http)
        assistants = await lg.assistants.search()
        assert {"review", "investigate", "build"} <= {a["assistant_id"] for a in assistants}
        assert (await lg.assistants.get("review"))["graph_id"] == "review"
        with pytest.raises(NotFoundError):
            await lg.assistants.get("no-such-agent")

        thread = await lg.threads.create(metadata={"graph_id": "investigate"})
        thread_id = thread["thread_id"]
        assert thread["status"] == "idle" and thread["values"] == {"messages": []}

        values = await lg.runs.wait(thread_id, "investigate", input={"messages": [HUMAN]})
        assert text_of(values)[-2:] == [
            ("human", "What does the project do?"),
            ("ai", "The project adds numbers."),
        ]

        follow_up = {"messages": [{"role": "user", "content": "How many functions?"}]}
        parts = [
            part
            async for part in lg.runs.stream(
                thread_id, "investigate", input=follow_up, stream_mode=["messages-tuple", "values"]
            )
        ]
        assert parts[0].event == "metadata"
        chunks = [p.data[0] for p in parts if p.event == "messages"]
        tokens = [c["content"] for c in chunks if c["type"] == "AIMessageChunk"]
        assert len(tokens) > 1, "the answer arrives as several tokens"
        assert "".join(tokens) == "It has one function, add, in pkg/core.py."
        last_values = [p.data for p in parts if p.event == "values"][-1]
        assert text_of(last_values) == [
            ("human", "What does the project do?"),
            ("ai", "The project adds numbers."),
            ("human", "How many functions?"),
            ("ai", "It has one function, add, in pkg/core.py."),
        ]
        # The model saw the thread's history: the session is the thread.
        sent = [(m["role"], m["content"]) for m in llm.last_request(1)["messages"]][1:]
        assert sent[:2] == [
            ("user", "What does the project do?"),
            ("assistant", "The project adds numbers."),
        ]

        state = await lg.threads.get_state(thread_id)
        assert text_of(state["values"])[-1] == ("ai", "It has one function, add, in pkg/core.py.")
        runs = await lg.runs.list(thread_id)
        assert [r["status"] for r in runs] == ["success", "success"]
        assert len(await lg.threads.get_history(thread_id)) == 2
        found = await lg.threads.search(metadata={"graph_id": "investigate"})
        assert thread_id in [t["thread_id"] for t in found]

        with pytest.raises(UnprocessableEntityError, match="debug"):
            await lg.runs.create(thread_id, "investigate", input=follow_up, stream_mode="debug")

        # Another tenant's thread is unknown to it, whatever it asks.
        mallory = langgraph(http, "mallory", "other-tenant")
        with pytest.raises(NotFoundError):
            await mallory.threads.get(thread_id)
        with pytest.raises(httpx.HTTPStatusError) as refused:  # `wait` raises httpx's own
            await mallory.runs.wait(thread_id, "investigate", input=follow_up)
        assert refused.value.response.status_code == 404
        with pytest.raises(NotFoundError):
            await mallory.runs.get(thread_id, runs[0]["run_id"])
        assert thread_id not in [t["thread_id"] for t in await mallory.threads.search()]


async def test_an_approval_interrupt_is_resumed_with_command_and_the_tool_runs_once(
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[Turn(tool_calls=[write("notes/out.txt", "hello")]), Turn(content="Wrote it.")]
        )
    )
    async with keel_app(llm) as http:
        lg = langgraph(http)
        thread_id = (await lg.threads.create(metadata={"graph_id": "build"}))["thread_id"]
        ask = {"messages": [{"role": "user", "content": "Write the notes."}]}
        parts = [
            p async for p in lg.runs.stream(thread_id, "build", input=ask, stream_mode="updates")
        ]
        run_id = parts[0].data["run_id"]
        interrupts = parts[-1].data["__interrupt__"]
        assert len(interrupts) == 1
        value = interrupts[0]["value"]
        assert value["tool"] == "write_file" and value["arguments"]["path"] == "notes/out.txt"
        assert len(value["payload_hash"]) == 64
        assert (await lg.runs.get(thread_id, run_id))["status"] == "interrupted"
        thread = await lg.threads.get(thread_id)
        assert thread["status"] == "interrupted"
        assert not (workspace / "notes" / "out.txt").exists()

        # A message while the run waits, with multitask_strategy=reject, is refused.
        with pytest.raises(ConflictError, match="busy"):
            await lg.runs.create(thread_id, "build", input=ask, multitask_strategy="reject")
        with pytest.raises(UnprocessableEntityError, match="rollback"):
            await lg.runs.create(thread_id, "build", input=ask, multitask_strategy="rollback")
        # Another tenant cannot resume it: the thread is unknown to them.
        with pytest.raises(NotFoundError):
            await langgraph(http, "mallory", "other-tenant").runs.create(
                thread_id, "build", command=Command(resume=True)
            )

        resumed = [
            p
            async for p in lg.runs.stream(
                thread_id,
                "build",
                command=Command(
                    resume={"decision": "approve", "payload_hash": value["payload_hash"]}
                ),
                stream_mode=["updates", "custom"],
            )
        ]
        assert resumed[0].data["run_id"] == run_id, "the same durable run goes on"
        updates = [p.data for p in resumed if p.event == "updates"]
        assert updates[0]["tools"]["messages"][0]["name"] == "write_file"
        assert updates[-1]["agent"]["messages"][0]["content"] == "Wrote it."
        custom = [p.data["type"] for p in resumed if p.event == "custom"]
        assert "interaction_resolved" in custom
        assert (workspace / "notes" / "out.txt").read_text() == "hello"
        assert await executions(database_url, run_id) == 1
        assert (await lg.runs.get(thread_id, run_id))["status"] == "success"
        # Joining the finished run answers its final state; resuming again finds nothing.
        joined = await lg.runs.join(thread_id, run_id)
        assert joined["messages"][-1]["content"] == "Wrote it."
        with pytest.raises(ConflictError, match="no interrupt"):
            await lg.runs.create(thread_id, "build", command=Command(resume=True))
        assert await executions(database_url, run_id) == 1


async def test_a_cron_is_a_schedule_that_starts_runs(
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(Script(turns=[Turn(content="Nothing changed.")]))
    async with keel_app(llm) as http:
        lg = langgraph(http)
        cron = await lg.crons.create(
            "review",
            schedule="0 2 * * *",
            input={"messages": [{"role": "user", "content": "Review what changed."}]},
            timezone="Europe/Berlin",
        )
        cron_id = cron["cron_id"]
        assert cron["schedule"] == "0 2 * * *" and cron["next_run_date"] is not None
        fired = await http.post(f"/v1/schedules/{cron_id}/trigger", json={})
        assert fired.status_code == 202, fired.text
        run = await eventually(lambda: scheduled_run(http, cron_id), "a run of the cron", within=30)
        assert run["trigger"] == "schedule" and run["report"] == "Nothing changed."

        async def listed() -> bool:  # Temporal's schedule list is eventually consistent
            return cron_id in [c["cron_id"] for c in await lg.crons.search(assistant_id="review")]

        await eventually(listed, "the cron in the list", within=10)
        with pytest.raises(UnprocessableEntityError, match="thread"):
            await lg.crons.create_for_thread("t-1", "review", schedule="0 2 * * *", input={})
        with pytest.raises(NotFoundError):
            await langgraph(http, "mallory", "other-tenant").crons.delete(cron_id)
        await lg.crons.delete(cron_id)


async def scheduled_run(http: httpx.AsyncClient, schedule_id: str) -> dict[str, Any] | None:
    """The schedule's latest run once it completed."""
    runs = (await http.get("/v1/runs", params={"schedule": schedule_id})).json()["runs"]
    return dict(runs[0]) if runs and runs[0]["status"] == "completed" else None


@pytest.mark.durability  # two `keel worker` processes, one killed mid-step
async def test_a_killed_worker_mid_stream_and_join_returns_the_completed_run(
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    spawn_worker: Callable[[Settings], subprocess.Popen[bytes]],  # noqa: F811
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[ScriptedToolCall(name="list_files", arguments={})]),
                Turn(content="Still thinking.", tool_calls=[], delay_s=3.0),
            ]
        )
    )
    settings = settings_for(llm, workspace, api_port=free_port())
    first = spawn_worker(settings)
    async with serve_api(settings) as url:
        lg = client_for(url, "default", "alice")
        thread_id = (await lg.threads.create(metadata={"graph_id": "review"}))["thread_id"]
        created: list[str] = []
        stream = lg.runs.stream(
            thread_id,
            "review",
            input={"messages": [HUMAN]},
            stream_mode="updates",
            on_run_created=lambda meta: created.append(meta["run_id"]),
        )
        reading = asyncio.ensure_future(_collect(stream))
        await wait_until(lambda: llm.requests_by_turn[1] >= 1)
        first.send_signal(signal.SIGKILL)  # mid-step: the model call is in flight
        first.wait()
        spawn_worker(settings)
        [run_id] = created
        joined = await asyncio.wait_for(lg.runs.join(thread_id, run_id), timeout=120)
        assert joined["messages"][-1]["content"] == "Still thinking."
        assert (await lg.runs.get(thread_id, run_id))["status"] == "success"
        parts = await asyncio.wait_for(reading, timeout=60)
        # The stream the client opened before the kill saw the run through to its end.
        answers = [p.data["agent"]["messages"][0]["content"] for p in parts if "agent" in p.data]
        assert answers[-1] == "Still thinking."
    assert llm.requests_by_turn[0] == 1, "the finished step was not asked again"


async def _collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [part async for part in stream]


async def test_cancel_and_multitask_interrupt_end_the_waiting_run(
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(turns=[Turn(tool_calls=[write("a.txt", "a")]), Turn(content="Answered after all.")])
    )
    async with keel_app(llm) as http:
        lg = langgraph(http)
        thread_id = (await lg.threads.create(metadata={"graph_id": "build"}))["thread_id"]
        ask = {"messages": [{"role": "user", "content": "Write a.txt."}]}
        first = await lg.runs.wait(thread_id, "build", input=ask)
        run_id = first["__interrupt__"][0]["value"]["run_id"]
        await lg.runs.cancel(thread_id, run_id)
        await cancelled(store, run_id)
        # LangGraph calls a cancelled run interrupted, as it does one waiting on a person.
        assert (await lg.runs.get(thread_id, run_id))["status"] == "interrupted"
        joined = await asyncio.wait_for(lg.runs.join(thread_id, run_id), timeout=60)
        assert "__interrupt__" not in joined, "a cancelled run waits on nothing"

        async def idle() -> bool:  # the session workflow notices the run ended a moment later
            return bool((await lg.threads.get(thread_id))["status"] == "idle")

        await eventually(idle, "the thread to be idle", within=10)
        with pytest.raises(ConflictError):  # already over
            await lg.runs.cancel(thread_id, run_id)

        second = await lg.runs.wait(thread_id, "build", input=ask)
        waiting = second["__interrupt__"][0]["value"]["run_id"]
        # A new message with multitask_strategy=interrupt cancels the waiting run, then runs.
        follow_up = {"messages": [{"role": "user", "content": "Never mind; just answer."}]}
        third = await lg.runs.create(
            thread_id, "build", input=follow_up, multitask_strategy="interrupt"
        )
        assert third["multitask_strategy"] == "interrupt"
        joined = await asyncio.wait_for(lg.runs.join(thread_id, third["run_id"]), timeout=60)
        # It ran (the scripted model asks for the write again): the new run waits now.
        assert joined["__interrupt__"][0]["value"]["run_id"] == third["run_id"]
        await cancelled(store, waiting)
        await lg.runs.cancel(thread_id, third["run_id"])
    assert not (workspace / "a.txt").exists()


async def cancelled(store: Store, run_id: str) -> None:
    """Until Keel records the run cancelled (the workflow finishes cancelling a moment
    after the request)."""

    async def recorded() -> bool:
        record = await store.get_run(run_id)
        return record is not None and record.status == "cancelled"

    await eventually(recorded, f"{run_id} to be recorded cancelled", within=30)
