"""Live event streams (SSE) over real HTTP, with the real worker, Temporal and Postgres."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from keel.activities.store.records import NewRun
from keel.activities.store.run_store import Store
from keel.api.events import stream as event_stream
from keel.api.events.hub import APPLICATION_NAME, EventNotice, Resync, Subscription
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.conftest import auth_headers
from tests.integration.keel_http import LaunchKeel, StartLLM, eventually, run_reaches

STREAM_TIMEOUT = httpx.Timeout(60.0)
READS = ["pkg/core.py", "pkg/__init__.py", "README.md"]


@dataclass
class Sse:
    """One message of an event stream; a comment has only `comment` set."""

    event: str | None = None
    id: str | None = None
    data: str | None = None
    comment: str | None = None

    def json(self) -> dict[str, object]:
        assert self.data is not None
        body: dict[str, object] = json.loads(self.data)
        return body


async def read_sse(response: httpx.Response) -> AsyncIterator[Sse]:
    """Parse `text/event-stream` as it arrives."""
    message = Sse()
    async for line in response.aiter_lines():
        if not line:
            if message != Sse():
                yield message
            message = Sse()
        elif line.startswith(":"):
            yield Sse(comment=line[1:].strip())
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                message.data = value if message.data is None else f"{message.data}\n{value}"
            elif name in ("event", "id"):
                setattr(message, name, value)


def event_data(message: Sse) -> dict[str, object]:
    """The `data` of a durable event's body."""
    data = message.json()["data"]
    assert isinstance(data, dict)
    return data


async def bare_run(
    store: Store,
    workspace: Path,
    prefix: str,
    *,
    tenant_id: str = "default",
    run_id: str | None = None,
) -> str:
    """A run row with no workflow behind it; the test writes its events itself."""
    run_id = run_id or f"{prefix}-{uuid.uuid4().hex[:8]}"
    await store.create_run(
        NewRun(
            run_id=run_id,
            tenant_id=tenant_id,
            agent="review",
            model="scripted",
            requester="user:alice",
            trigger="api",
            workspace=str(workspace),
            input="x",
        )
    )
    return run_id


@asynccontextmanager
async def collect_seqs(
    http: httpx.AsyncClient, run_id: str
) -> AsyncIterator[Callable[..., Awaitable[int | None]]]:
    """Read a run's stream in the background; yields `next_seq()` (None once it ended)."""
    seqs: asyncio.Queue[int | None] = asyncio.Queue()

    async def read() -> None:
        async with http.stream("GET", stream_url(run_id)) as response:
            assert response.status_code == 200
            async for message in read_sse(response):
                if message.id is not None:
                    await seqs.put(int(message.id))
        await seqs.put(None)

    async def next_seq(wait_s: float = 10.0) -> int | None:
        return await asyncio.wait_for(seqs.get(), wait_s)

    reader = asyncio.create_task(read())
    try:
        yield next_seq
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


def stream_url(run_id: str) -> str:
    return f"/v1/runs/{run_id}/events/stream"


async def start_run(http: httpx.AsyncClient, workspace: Path, run_id: str) -> None:
    created = await http.post(
        "/v1/runs",
        json={
            "agent": "review",
            "input": "Review it.",
            "workspace": str(workspace),
            "run_id": run_id,
        },
    )
    assert created.status_code == 201, created.text


async def all_events(http: httpx.AsyncClient, run_id: str) -> list[dict[str, object]]:
    page = (await http.get(f"/v1/runs/{run_id}/events", params={"limit": 1000})).json()
    events: list[dict[str, object]] = page["events"]
    return events


def reads_then_answer(delay_s: float, answer: str = "## Files reviewed\n{files_read}") -> Script:
    reads = [
        Turn(
            tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": path})],
            delay_s=delay_s,
        )
        for path in READS
    ]
    return Script(turns=[*reads, Turn(content=answer, delay_s=delay_s)])


async def test_a_dropped_stream_resumes_from_last_event_id_with_every_event_once(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(reads_then_answer(delay_s=0.4))
    run_id = f"sse-resume-{uuid.uuid4().hex[:8]}"
    async with keel_app(llm, http_timeout=STREAM_TIMEOUT) as http:
        await start_run(http, workspace, run_id)
        received: list[Sse] = []
        async with asyncio.timeout(60), http.stream("GET", stream_url(run_id)) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            assert response.headers["x-accel-buffering"] == "no"
            async for message in read_sse(response):
                if message.id is not None:
                    received.append(message)
                if len(received) == 3:
                    break  # drop the connection mid-run
        assert received[-1].event != "done"

        async def more_than_received() -> list[dict[str, object]] | None:
            events = await all_events(http, run_id)
            return events if len(events) > len(received) else None

        # The run goes on while nobody listens.
        meanwhile = await eventually(more_than_received, "events while disconnected")
        assert meanwhile[-1]["type"] != "done", "the run ended before the reconnect"

        resumed: list[Sse] = []
        headers = {"Last-Event-ID": received[-1].id or ""}
        async with (
            asyncio.timeout(60),
            http.stream("GET", stream_url(run_id), headers=headers) as response,
        ):
            assert response.status_code == 200
            async for message in read_sse(response):
                if message.id is not None:
                    resumed.append(message)
        # The stream closed by itself after the terminal event.
        assert resumed and resumed[-1].event == "done"

        stored = await all_events(http, run_id)
        streamed = [m.json() for m in received + resumed]
        assert [int(m.id or 0) for m in received + resumed] == [e["seq"] for e in stored]
        assert [m.event for m in received + resumed] == [e["type"] for e in stored]
        assert streamed == stored
        assert {"run_started", "message", "usage", "tool_call", "tool_result", "done"} <= {
            str(e["type"]) for e in stored
        }


async def test_message_deltas_arrive_while_a_long_answer_streams(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    answer = "## Review\n" + "".join(f"Line {i}: all is well — ça va.\n" for i in range(400))
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": READS[0]})],
                    delay_s=1.0,
                ),
                Turn(content=answer),
            ]
        )
    )
    run_id = f"sse-deltas-{uuid.uuid4().hex[:8]}"
    async with keel_app(llm, http_timeout=STREAM_TIMEOUT) as http:
        await start_run(http, workspace, run_id)
        messages: list[Sse] = []
        async with asyncio.timeout(60), http.stream("GET", stream_url(run_id)) as response:
            async for message in read_sse(response):
                if message.event is not None:
                    messages.append(message)

    deltas = [m for m in messages if m.event == "message_delta"]
    assert deltas, "no message_delta arrived"
    assert all(m.id is None for m in deltas), "deltas must not move the resume point"
    bodies = [m.json() for m in deltas]
    assert {b["run_id"] for b in bodies} == {run_id}
    final = [b for b in bodies if b["step"] == 2]
    assert [b["delta_index"] for b in final] == list(range(len(final)))
    assert "".join(str(b["delta"]) for b in final) == answer
    # Batched: a handful of notices, none near the NOTIFY limit.
    assert len(final) <= len(answer) // 512 + 4
    assert max(len(json.dumps(b).encode()) for b in bodies) < 4000
    # Every delta of step 2 comes before its durable message, which holds the whole text.
    last_delta = max(i for i, m in enumerate(messages) if m in deltas and m.json()["step"] == 2)
    stored = next(
        i for i, m in enumerate(messages) if m.event == "message" and event_data(m).get("step") == 2
    )
    assert last_delta < stored
    assert event_data(messages[stored])["content"] == answer


async def test_a_finished_run_streams_its_backlog_and_other_tenants_see_nothing(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(reads_then_answer(delay_s=0.0))
    run_id = f"sse-done-{uuid.uuid4().hex[:8]}"
    async with keel_app(llm, http_timeout=STREAM_TIMEOUT) as http:
        await start_run(http, workspace, run_id)
        await run_reaches(http, run_id, "completed", "failed")
        stored = await all_events(http, run_id)

        async with asyncio.timeout(10), http.stream("GET", stream_url(run_id)) as response:
            backlog = [m async for m in read_sse(response) if m.id is not None]
        assert [m.json() for m in backlog] == stored

        # `?after=` and `Last-Event-ID` both resume; the header wins.
        async with (
            asyncio.timeout(10),
            http.stream(
                "GET", stream_url(run_id), params={"after": 1}, headers={"Last-Event-ID": "3"}
            ) as response,
        ):
            tail = [m async for m in read_sse(response) if m.id is not None]
        assert [int(m.id or 0) for m in tail] == [e["seq"] for e in stored][3:]
        async with (
            asyncio.timeout(10),
            http.stream("GET", stream_url(run_id), params={"after": 2}) as response,
        ):
            tail = [m async for m in read_sse(response) if m.id is not None]
        assert [int(m.id or 0) for m in tail] == [e["seq"] for e in stored][2:]
        bad = await http.get(stream_url(run_id), headers={"Last-Event-ID": "abc"})
        assert bad.status_code == 422 and "Last-Event-ID" in bad.text

        other = auth_headers("other-tenant", "x")
        assert (await http.get(stream_url(run_id), headers=other)).status_code == 404
        assert (await http.get(f"/v1/runs/{run_id}/events", headers=other)).status_code == 404
        assert (await http.get(stream_url("no-such-run"))).status_code == 404

        spec = (await http.get("/openapi.json")).json()
        operation = spec["paths"]["/v1/runs/{run_id}/events/stream"]["get"]
        assert "text/event-stream" in operation["responses"]["200"]["content"]
        assert "Last-Event-ID" in operation["description"]


async def test_an_idle_stream_sends_keepalives(
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(event_stream, "HEARTBEAT_S", 0.2)
    llm = scripted(Script(turns=[Turn(content="Nothing to report.", delay_s=2.0)]))
    run_id = f"sse-idle-{uuid.uuid4().hex[:8]}"
    async with keel_app(llm, http_timeout=STREAM_TIMEOUT) as http:
        await start_run(http, workspace, run_id)
        messages: list[Sse] = []
        async with asyncio.timeout(30), http.stream("GET", stream_url(run_id)) as response:
            messages = [m async for m in read_sse(response)]
    first_message = next(i for i, m in enumerate(messages) if m.event == "message")
    keepalives = [m for m in messages[:first_message] if m.comment == "keepalive"]
    assert len(keepalives) >= 4, messages
    assert messages[-1].event == "done"


async def test_events_written_out_of_order_are_streamed_in_seq_order(
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
) -> None:
    """Parallel tools commit their events out of seq order; the stream waits for the gap."""
    llm = scripted(Script(turns=[Turn(content="unused")]))
    run_id = await bare_run(store, workspace, "sse-gap")
    async with (
        keel_app(llm, http_timeout=STREAM_TIMEOUT, worker=False) as http,
        collect_seqs(http, run_id) as next_seq,
    ):
        await store.put_event(run_id, 1, "run_started", {})
        assert await next_seq() == 1
        await store.put_event(run_id, 3, "tool_result", {"n": 3})
        await store.put_event(run_id, 4, "tool_call", {"n": 4})
        with pytest.raises(TimeoutError):
            await next_seq(0.7)  # 3 and 4 wait while 2 is still being written
        await store.put_event(run_id, 2, "tool_call", {"n": 2})
        assert [await next_seq() for _ in range(3)] == [2, 3, 4]
        # Seq 5 never comes: the run ended without it, so the stream skips it and ends.
        await store.put_event(run_id, 6, "done", {"status": "completed"})
        assert [await next_seq(), await next_seq()] == [6, None]


async def test_streams_lose_nothing_when_the_hub_loses_its_connection(
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    keel_app: LaunchKeel,
    database_url: str,
) -> None:
    llm = scripted(Script(turns=[Turn(content="unused")]))
    run_id = await bare_run(store, workspace, "sse-hub-drop")
    async with (
        keel_app(llm, http_timeout=STREAM_TIMEOUT, worker=False) as http,
        collect_seqs(http, run_id) as next_seq,
    ):
        await store.put_event(run_id, 1, "run_started", {})
        assert await next_seq() == 1
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as admin:
            cur = await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND datname = current_database()",
                (APPLICATION_NAME,),
            )
            assert [row[0] for row in await cur.fetchall()] == [True]
        # Written while the hub is away: its notice is lost, the resync finds it.
        await store.put_event(run_id, 2, "message", {})
        assert await next_seq() == 2
        await asyncio.sleep(0.5)
        await store.put_event(run_id, 3, "done", {"status": "completed"})
        assert [await next_seq(), await next_seq()] == [3, None]


def test_a_subscriber_that_falls_behind_gets_a_resync_instead() -> None:
    subscription = Subscription("run-1", maxsize=3)
    for seq in range(1, 6):
        subscription.offer(EventNotice(run_id="run-1", seq=seq, type="message"))
    pending = subscription.pending()
    assert pending == [Resync(), EventNotice(run_id="run-1", seq=5, type="message")]
    assert subscription.resyncs == 1
