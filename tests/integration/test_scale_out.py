"""Keel scaled out, a drill: three `keel worker` and two `keel api` processes against one
Temporal dev server and one Postgres, with workers SIGKILLed every few seconds and one
API once.

`RUNS` runs start through both APIs (every third asks to run a command and waits for
its approval); each is approved through the API that did not start it, and its event
stream is followed through that other API too, resumed through the next one with
`Last-Event-ID` when its API dies. Meanwhile a schedule fires; after the kills a
retention sweep is asked for. Then Postgres and the scripted model server must agree that:

- every run completed, each step counted once in its usage;
- every approved command ran exactly once (one claim in `tool_executions`, one mark in
  its file), or, killed mid-command, is reported as of unknown outcome and never twice;
- every stream delivered every stored event once and in seq order, across its
  reconnections, and streams cut by the API's death resumed through the other API;
- no model step was asked twice, except a step whose asking worker was killed before
  its answer was recorded;
- the schedule started one run per fire, each an ordinary completed run;
- the sweep ran once and purged the expired run once.

The figures it prints (and more: memory per worker, drain time of many waiting runs)
come from `bench/scale_out.py`, which reuses `tests/integration/cluster.py`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import secrets
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row
from temporalio.client import Client
from temporalio.service import RPCError

from keel.api.core.retention import RETENTION_SCHEDULE_ID
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import (
    Conversation,
    Script,
    ScriptedLLMServer,
    ScriptedToolCall,
    Turn,
)
from tests.conftest import auth_headers
from tests.integration.cluster import (
    TERMINAL_EVENTS,
    Followed,
    KeelCluster,
    ModelRequestLog,
    follow_stream,
)
from tests.integration.keel_http import ALICE, MakeSettings

RUNS = 200
"""The issue asks for 300 (`bench/scale_out.py --runs 300` does them); 200 fit the drill in
about three minutes on a loaded 2-core machine, kills and all."""
WORKERS = 3
APIS = 2
ASKS_EVERY = 3
"""Every third run asks to run a command and waits for its approval."""
IN_FLIGHT = 40
"""Runs being started, followed or approved at once by this test."""
KILL_EVERY_S = (2.0, 4.0)
RESTART_AFTER_S = (0.5, 2.0)
API_KILL_AT = 0.4
"""The API dies once this share of the runs has started, with streams open on it."""
API_DOWN_S = 2.0
STREAMS_CUT = 3
"""At least this many streams with events delivered are open on the API when it dies."""
SCHEDULE_EVERY_S = 5
DRILL_TIMEOUT_S = 900.0
"""Everything together; a healthy drill takes a fraction of it."""
SETTLE_TIMEOUT_S = 180.0
RETRY_S = 0.25
APPEND_MARK = ["sh", "-c", "printf x >> ran.txt"]
ADMIN = auth_headers("ops", "root", "keel:admin")
AGE_SQL = (
    "UPDATE runs SET created_at = created_at - make_interval(days => %(days)s),"
    " finished_at = finished_at - make_interval(days => %(days)s) WHERE id = %(run)s",
    "UPDATE run_texts SET created_at = created_at - make_interval(days => %(days)s)"
    " WHERE tenant_id = %(tenant)s AND input = %(task)s",
)
"""Make a run and its stored texts look `days` old (as `test_retention.age` does)."""
FINISHED_SQL = (
    "SELECT 1 FROM runs WHERE id = %s AND status = 'completed' AND finished_at IS NOT NULL"
)
STREAM_TIMEOUT = httpx.Timeout(60.0, connect=5.0)


def drill_script() -> Script:
    """A run reads the README and answers; one asked to append a mark runs a command
    (which the build agent must have approved) and answers."""
    read = ScriptedToolCall(name="read_file", arguments={"path": "README.md"})
    mark = ScriptedToolCall(name="bash", arguments={"command": APPEND_MARK})
    return Script(
        turns=[Turn(tool_calls=[read]), Turn(content="Read it.")],
        conversations=[
            Conversation(
                match="Append a mark", turns=[Turn(tool_calls=[mark]), Turn(content="Appended.")]
            )
        ],
    )


@dataclass
class DrillRun:
    index: int
    run_id: str
    workspace: Path
    starter: int
    """The API asked to start it; the other follows and approves it."""
    asks: bool
    started_via: int | None = None
    decided_via: int | None = None
    decision_s: float | None = None
    decision_status: int | None = None
    """200: the run took it at once; 202: queued for the run (no worker took it in 3 s)."""
    followed: Followed = field(default_factory=Followed)

    @property
    def tag(self) -> str:
        return f"r{self.index:04d}"

    @property
    def other(self) -> int:
        return 1 - self.starter


@dataclass
class Chaos:
    """The kills, as they happened."""

    worker_kills: list[tuple[str, float]] = field(default_factory=list)
    """(generation, when) of each worker SIGKILLed."""
    api_kill: tuple[str, float] | None = None


async def post_retrying(
    clients: list[httpx.AsyncClient],
    order: list[int],
    path: str,
    body: dict[str, Any],
    ok: set[int],
    headers: dict[str, str] = ALICE,
) -> tuple[int, httpx.Response]:
    """POST to the first API of `order` that answers; a dead one (no connection, a 5xx)
    passes the same request to the next, as a load balancer would, until one takes it."""
    while True:
        for slot in order:
            try:
                response = await clients[slot].post(path, json=body, headers=headers)
            except httpx.TransportError:
                continue
            if response.status_code in ok:
                return slot, response
            if response.status_code < 500:
                raise AssertionError(f"POST {path}: {response.status_code} {response.text}")
        await asyncio.sleep(RETRY_S)


async def get_retrying(
    clients: list[httpx.AsyncClient],
    order: list[int],
    path: str,
    headers: dict[str, str] = ALICE,
    **params: Any,
) -> Any:
    while True:
        for slot in order:
            try:
                response = await clients[slot].get(path, headers=headers, params=params)
            except httpx.TransportError:
                continue
            if response.status_code == 200:
                return response.json()
            if response.status_code < 500:
                raise AssertionError(f"GET {path}: {response.status_code} {response.text}")
        await asyncio.sleep(RETRY_S)


async def drive(
    run: DrillRun, clients: list[httpx.AsyncClient], started: Callable[[], None]
) -> None:
    """Start the run through its API, follow its stream and approve it through the other."""
    task = "Append a mark to ran.txt." if run.asks else "Read the README."
    body = {
        "agent": "build",
        "input": f"[drill {run.tag}] {task}",
        "workspace": str(run.workspace),
        "run_id": run.run_id,
    }
    run.started_via, _ = await post_retrying(
        clients, [run.starter, run.other], "/v1/runs", body, {201}
    )
    started()
    following = asyncio.create_task(
        follow_stream([clients[run.other], clients[run.starter]], run.run_id, ALICE, run.followed)
    )
    try:
        if run.asks:
            await run.followed.pending.wait()
            path = f"/v1/runs/{run.run_id}/interactions"
            [ia] = [
                i
                for i in await get_retrying(clients, [run.other, run.starter], path)
                if i["status"] == "pending"
            ]
            decision = {"decision": "approve", "payload_hash": ia["payload_hash"]}
            began = time.monotonic()
            run.decided_via, answer = await post_retrying(
                clients, [run.other, run.starter], f"{path}/{ia['id']}", decision, {200, 202}
            )
            run.decision_status = answer.status_code
            run.decision_s = time.monotonic() - began
        await following
    finally:
        following.cancel()


async def chaos(
    cluster: KeelCluster,
    temporal: Client,
    stop: asyncio.Event,
    chaos: Chaos,
    seed: int,
    every: tuple[float, float] = KILL_EVERY_S,
) -> None:
    """Every few seconds a random worker dies; it is started again a moment later."""
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), rng.uniform(*every))
            return
        except TimeoutError:
            pass
        slot = rng.randrange(cluster.worker_slots)
        killed = cluster.kill("worker", slot)
        chaos.worker_kills.append((killed.generation, killed.killed_at or time.monotonic()))
        await asyncio.sleep(rng.uniform(*RESTART_AFTER_S))
        cluster.restart("worker", slot)
    for slot in range(cluster.worker_slots):
        await cluster.worker_ready(temporal, slot)


async def kill_an_api(
    cluster: KeelCluster,
    runs: list[DrillRun],
    enough_started: asyncio.Event,
    chaos: Chaos,
    seed: int,
) -> None:
    """Once enough runs have started, one API dies with streams open on it (that have
    delivered events, so their resumption has a `Last-Event-ID` to send), and returns."""
    slot = random.Random(seed).randrange(APIS)
    await enough_started.wait()

    async def streams_open_on_it() -> bool:
        url = cluster.api_url(slot)
        open_ = [
            r
            for r in runs
            if r.followed.connections == [url]
            and r.followed.events
            and r.followed.events[-1][1] not in TERMINAL_EVENTS
        ]
        return len(open_) >= STREAMS_CUT

    await until(streams_open_on_it, f"{STREAMS_CUT} streams open on API {slot}")
    killed = cluster.kill("api", slot)
    chaos.api_kill = (killed.generation, killed.killed_at or time.monotonic())
    await asyncio.sleep(API_DOWN_S)
    cluster.restart("api", slot)
    await cluster.api_ready(slot)


async def schedule_fires(
    clients: list[httpx.AsyncClient], workspace: Path, stop: asyncio.Event
) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """A schedule fires every few seconds while the drill runs; paused at its end. Its
    description and runs once every run it started has ended."""
    body = {
        "agent": "build",
        "input": "[drill sched] Read the README.",
        "workspace": str(workspace),
        "interval_s": SCHEDULE_EVERY_S,
    }
    _, created = await post_retrying(clients, [0, 1], "/v1/schedules", body, {201})
    sid = created.json()["id"]
    await stop.wait()
    await post_retrying(clients, [1, 0], f"/v1/schedules/{sid}/pause", {}, {200})

    async def all_ended() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        detail = await get_retrying(clients, [0, 1], f"/v1/schedules/{sid}")
        page = await get_retrying(clients, [1, 0], f"/v1/schedules/{sid}/runs", limit=200)
        runs = page["runs"]
        if detail["running_runs"] or any(r["status"] not in ENDED for r in runs):
            return None
        return detail, runs

    detail, runs = await until(all_ended, "the scheduled runs to end")
    # The session's Temporal server is shared with other tests: the schedule goes.
    assert (await clients[0].delete(f"/v1/schedules/{sid}", headers=ALICE)).status_code == 204
    return sid, detail, runs


ENDED = ("completed", "failed", "cancelled")


async def until(check: Any, what: str, within: float = SETTLE_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


async def sweep_once(
    clients: list[httpx.AsyncClient],
    temporal: Client,
    database_url: str,
    workspace: Path,
) -> dict[str, Any]:
    """A tenant's finished run is made 40 days old, a 30-day policy set through one API
    and a sweep asked for through the other: what the audit and the schedule say after."""
    tenant = f"drill-ret-{uuid.uuid4().hex[:8]}"
    headers = auth_headers(tenant, "alice")
    task = "[drill ret] Read the README."
    body = {"agent": "build", "input": task, "workspace": str(workspace)}
    _, created = await post_retrying(clients, [0, 1], "/v1/runs", body, {201}, headers)
    run_id = created.json()["id"]

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as db:

        async def finished() -> bool:
            # Its end in Postgres, which the sweep reads (the API may show it a moment before).
            cur = await db.execute(FINISHED_SQL, (run_id,))
            return bool(await cur.fetchone())

        await until(finished, f"run {run_id} of {tenant} to complete")
        values = {"days": 40, "run": run_id, "tenant": tenant, "task": task}
        aged = [(await db.execute(statement, values)).rowcount for statement in AGE_SQL]
        assert aged == [1, 1], f"aging {run_id} changed {aged} rows"
    policy = f"/v1/admin/retention/tenants/{tenant}"
    await put_retrying(clients, [1, 0], policy, {"days": 30})
    schedule = temporal.get_schedule_handle(RETENTION_SCHEDULE_ID)
    fired_before = (await schedule.describe()).info.num_actions
    await post_retrying(clients, [0, 1], "/v1/admin/retention/sweeps", {}, {202}, ADMIN)

    async def purged() -> list[dict[str, Any]] | None:
        rows = await get_retrying(
            clients, [1, 0], "/v1/admin/audit", ADMIN, tenant=tenant, limit=1000
        )
        found = [r for r in rows if r["action"] == "retention.purged"]
        return found or None

    entries = await until(purged, f"the sweep to purge {tenant}'s run")

    async def sweep_ended() -> bool:
        description = await schedule.describe()
        return not description.info.running_actions

    await until(sweep_ended, "the sweep to end")
    info = (await schedule.describe()).info
    await asyncio.sleep(1.0)  # a second sweep or purge would show by now
    entries = await purged()
    for slot in (1, 0):  # the tenant's policy goes with the drill
        try:
            if (await clients[slot].delete(policy, headers=ADMIN)).status_code == 204:
                break
        except httpx.TransportError:
            continue
    return {
        "tenant": tenant,
        "run_id": run_id,
        "purged": entries,
        "fires": info.num_actions - fired_before,
        "policy": policy,
    }


async def put_retrying(
    clients: list[httpx.AsyncClient], order: list[int], path: str, body: dict[str, Any]
) -> None:
    while True:
        for slot in order:
            try:
                response = await clients[slot].put(path, json=body, headers=ADMIN)
            except httpx.TransportError:
                continue
            if response.status_code == 200:
                return
            if response.status_code < 500:
                raise AssertionError(f"PUT {path}: {response.status_code} {response.text}")
        await asyncio.sleep(RETRY_S)


def make_workspaces(root: Path, count: int) -> list[Path]:
    paths = [root / f"{i:04d}" for i in range(count)]
    for path in paths:
        path.mkdir(parents=True)
        (path / "README.md").write_text(f"# project {path.name}\n")
    return paths


def payload_keys() -> str:
    """One AES-GCM key every process is given: what one encrypts, any other decrypts."""
    return json.dumps({"drill": base64.b64encode(secrets.token_bytes(32)).decode()})


@pytest.mark.durability
@pytest.mark.scale
# Seven keel processes take both cores: beside it, another process's timed waits starve.
@pytest.mark.cluster
async def test_three_workers_and_two_apis_survive_kills_and_keep_every_promise(
    temporal_client: Client,
    database_url: str,
    tmp_path: Path,
    settings_for: MakeSettings,
) -> None:
    seed = random.randrange(1 << 30)
    print(f"drill seed {seed}")
    root = tmp_path / "workspaces"
    workspaces = await asyncio.to_thread(make_workspaces, root, RUNS + 2)
    model = ScriptedLLMServer(drill_script())
    log = ModelRequestLog(model.app)
    model.app = log  # type: ignore[assignment]
    model.start()
    settings: Settings = settings_for(model.base_url, root, llm_max_attempts=3)
    cluster = KeelCluster(
        settings,
        tmp_path / "cluster",
        model_root=model.base_url.removesuffix("/v1"),
        workers=WORKERS,
        apis=APIS,
        api_ports=[free_port() for _ in range(APIS)],
        env={"KEEL_PAYLOAD_KEYS": payload_keys()},
    )
    runs = [
        DrillRun(
            index=i,
            run_id=f"drill-{i:04d}-{uuid.uuid4().hex[:6]}",
            workspace=workspaces[i],
            starter=i % APIS,
            asks=i % ASKS_EVERY == 0,
        )
        for i in range(RUNS)
    ]
    kills = Chaos()
    limits = httpx.Limits(max_connections=2 * IN_FLIGHT + 20)
    try:
        await cluster.start(temporal_client)
        clients = [
            httpx.AsyncClient(base_url=cluster.api_url(slot), timeout=STREAM_TIMEOUT, limits=limits)
            for slot in range(APIS)
        ]
        try:
            gate = asyncio.Semaphore(IN_FLIGHT)

            enough_started = asyncio.Event()

            def started() -> None:
                if sum(r.started_via is not None for r in runs) >= API_KILL_AT * RUNS:
                    enough_started.set()

            async def one(run: DrillRun) -> None:
                async with gate:
                    await drive(run, clients, started)

            stop = asyncio.Event()
            began = time.monotonic()
            async with asyncio.timeout(DRILL_TIMEOUT_S):
                killer = asyncio.create_task(chaos(cluster, temporal_client, stop, kills, seed))
                api_killer = asyncio.create_task(
                    kill_an_api(cluster, runs, enough_started, kills, seed)
                )
                fires = asyncio.create_task(schedule_fires(clients, workspaces[RUNS], stop))
                await asyncio.gather(*(one(run) for run in runs))
                elapsed = time.monotonic() - began
                stop.set()
                await asyncio.gather(killer, api_killer)
                sid, schedule, scheduled = await fires
                # After the kills: a purge batch has no heartbeat, so one whose worker died
                # is retried only after its 5-minute timeout, longer than the drill waits.
                swept = await sweep_once(
                    clients, temporal_client, database_url, workspaces[RUNS + 1]
                )
        finally:
            for http in clients:
                await http.aclose()
            await cleanup(temporal_client)

        asks_done = [r.decision_s for r in runs if r.decision_s is not None]
        print(
            f"{RUNS} runs in {elapsed:.1f} s ({RUNS / elapsed:.2f} runs/s) through {APIS} APIs "
            f"and {WORKERS} workers; {len(kills.worker_kills)} worker kills, API kill "
            f"{kills.api_kill}; decision p50 {statistics.median(asks_done):.3f} s, "
            f"max {max(asks_done):.3f} s, "
            f"{sum(r.decision_status == 202 for r in runs)} of {len(asks_done)} queued"
        )
        await check_runs(database_url, runs)
        check_streams(runs, await stored_events(database_url, runs), kills)
        check_model_asks(log, runs, cluster)
        check_schedule(sid, schedule, scheduled)
        check_sweep(swept)
    finally:
        cluster.stop()
        model.stop()


async def cleanup(temporal: Client) -> None:
    """The session's Temporal server is shared with other tests: no schedule stays."""
    try:
        await temporal.get_schedule_handle(RETENTION_SCHEDULE_ID).delete()
    except RPCError:  # gone already, or never made
        pass


async def check_runs(database_url: str, runs: list[DrillRun]) -> None:
    ids = [r.run_id for r in runs]
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as db:
        rows = {
            row["id"]: row
            for row in await (
                await db.execute(
                    "SELECT id, status, steps, prompt_tokens, error FROM runs WHERE id = ANY(%s)",
                    (ids,),
                )
            ).fetchall()
        }
        claims = {
            row["run_id"]: row["n"]
            for row in await (
                await db.execute(
                    "SELECT run_id, count(*) AS n FROM tool_executions"
                    " WHERE run_id = ANY(%s) GROUP BY run_id",
                    (ids,),
                )
            ).fetchall()
        }
        decided = {
            row["run_id"]: row["statuses"]
            for row in await (
                await db.execute(
                    "SELECT run_id, array_agg(status) AS statuses FROM interactions"
                    " WHERE run_id = ANY(%s) GROUP BY run_id",
                    (ids,),
                )
            ).fetchall()
        }
        told = {
            row["run_id"]: row["content"]
            for row in await (
                await db.execute(
                    "SELECT run_id, content FROM messages WHERE run_id = ANY(%s) AND role = 'tool'",
                    (ids,),
                )
            ).fetchall()
        }
    unfinished = [
        (i, rows.get(i, {}).get("status"))
        for i in ids
        if rows.get(i, {}).get("status") != "completed"
    ]
    assert not unfinished, f"runs that did not complete: {unfinished[:5]}"
    # Two steps each, each counted once in the run's usage (the scripted 100 a call).
    assert {(r["steps"], r["prompt_tokens"]) for r in rows.values()} == {(2, 200)}
    unknown, wrong = 0, []
    for run in runs:
        if not run.asks:
            continue
        mark_file = run.workspace / "ran.txt"
        marks = mark_file.read_text() if mark_file.exists() else ""
        said = told.get(run.run_id) or ""
        seen = (decided.get(run.run_id), claims.get(run.run_id), marks, said[:120])
        if said.startswith("exit code 0"):
            if seen[:3] != (["executed"], 1, "x"):
                wrong.append((run.run_id, seen))
        else:
            # Killed after the command started: the model is told so, and it never ran twice.
            unknown += 1
            if not (
                seen[:2] == (["failed"], 1)
                and marks in ("", "x")
                and "after this bash call had started" in said
            ):
                wrong.append((run.run_id, seen))
    assert not wrong, f"approved commands not run exactly once: {wrong[:5]}"
    print(f"approved commands: {sum(r.asks for r in runs) - unknown} ran once, {unknown} unknown")
    assert unknown <= len(runs) // ASKS_EVERY // 10, "most approved commands must run"


async def stored_events(
    database_url: str, runs: list[DrillRun]
) -> dict[str, list[tuple[int, str]]]:
    async with await psycopg.AsyncConnection.connect(database_url) as db:
        rows = await (
            await db.execute(
                "SELECT run_id, seq, type FROM events WHERE run_id = ANY(%s) ORDER BY run_id, seq",
                ([r.run_id for r in runs],),
            )
        ).fetchall()
    stored: dict[str, list[tuple[int, str]]] = {}
    for run_id, seq, kind in rows:
        stored.setdefault(run_id, []).append((seq, kind))
    return stored


def check_streams(
    runs: list[DrillRun], stored: dict[str, list[tuple[int, str]]], kills: Chaos
) -> None:
    for run in runs:
        events = stored[run.run_id]
        assert [seq for seq, _ in events] == list(range(1, len(events) + 1)), run.run_id
        assert run.followed.events == events, (run.run_id, run.followed.events, events)
        assert events[-1][1] == "done"
    resumed = [r for r in runs if r.followed.resumed_after]
    across = [r for r in resumed if len(set(r.followed.connections)) > 1]
    print(
        f"streams: {len(resumed)} resumed with Last-Event-ID, {len(across)} through the other API"
    )
    assert kills.api_kill is not None
    assert across, "no stream was cut by the API's death and resumed through the other"


def check_model_asks(log: ModelRequestLog, runs: list[DrillRun], cluster: KeelCluster) -> None:
    """Every step of every run was asked; a step asked again only after the worker that
    asked it first had died (its answer never recorded), never by a live one."""
    killed_at = {p.generation: p.killed_at for p in cluster.processes if p.killed_at is not None}
    by_step: dict[tuple[str, int], list[Any]] = {}
    for ask in log.asks:
        if ask.tag is not None:
            by_step.setdefault((ask.tag, ask.step), []).append(ask)
    again = 0
    for run in runs:
        for step in (0, 1):
            asks = by_step.get((run.tag, step), [])
            assert asks, f"{run.run_id} step {step} was never asked"
            for earlier in asks[:-1]:
                died = killed_at.get(earlier.caller)
                assert died is not None and died >= earlier.at, (
                    f"{run.run_id} step {step} asked again though {earlier.caller}, which "
                    f"asked it first, was not killed after asking: {asks}"
                )
                again += 1
    print(f"model steps: {len(by_step)} asked, {again} asked again after their worker died")


def check_schedule(sid: str, detail: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    assert detail["runs_started"] >= 2, detail
    ids = [r["id"] for r in runs]
    # One run per fire: Temporal's count of fires, Keel's runs, each named by its fire time.
    assert len(ids) == len(set(ids)) == detail["runs_started"], (detail, ids)
    assert all(i.startswith(f"run-{sid}-") for i in ids)
    assert {r["status"] for r in runs} == {"completed"}
    assert {r["trigger"] for r in runs} == {"schedule"}
    print(f"schedule: {len(ids)} fires, {len(ids)} runs")


def check_sweep(swept: dict[str, Any]) -> None:
    [purged] = swept["purged"]
    assert purged["detail"]["runs"] == [swept["run_id"]]
    assert swept["fires"] == 1, swept
