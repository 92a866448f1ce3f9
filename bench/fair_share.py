"""Fair shares: tenant A queues a burst of runs, then tenant B starts one; how long B waits.

    .venv/bin/python -m bench.fair_share [--runs 200] [--slots 8] [--delay 1.2] [--only on|off]

For each mode (Temporal's task queue fairness on, then off) it starts a Temporal dev
server (`matching.enableFairness` set or not), a scratch database on the Postgres of
DATABASE_URL (dropped at the end), the scripted model (every reply `--delay` seconds late,
slow enough that Keel calls it as a regular activity, not a local one), a Keel worker that
runs at most `--slots` activities at once, and the API. Tenant A POSTs `--runs` runs of two
model steps and a tool call each, 20 at a time; once all are accepted, tenant B POSTs one.
It prints, for B: when its run was recorded as started and when its first model call was
answered, after its POST; and how long A's burst took to drain. Every run goes through the
API, so each is started as Keel starts them: the tenant as fairness key
(`workflows/run/fair_share.py`). See bench/README.md and docs/operations.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.step_overhead import DEFAULT_ADMIN_URL, fresh_database
from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.api.identity.auth import dev_token
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import TemporalDevServer, free_port
from keel.worker.runtime import build_worker
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.temporal_client import connect

SECRET = "fair-share-bench-secret-of-32-bytes!"
POST_CONCURRENCY = 20
MAX_RUNS = 2000
DRAIN_TIMEOUT_S = 1800.0
TIMES_SQL = (
    "SELECT r.id, r.tenant_id, r.status, extract(epoch FROM r.started_at) AS started,"
    " extract(epoch FROM r.finished_at) AS finished,"
    " (SELECT extract(epoch FROM min(c.created_at)) FROM llm_calls c WHERE c.run_id = r.id)"
    " AS first_call FROM runs r WHERE r.id = ANY(%s)"
)


@dataclass(frozen=True)
class Figures:
    fairness: bool
    b_started_s: float
    b_first_call_s: float
    b_finished_s: float
    a_drained_s: float
    a_failed: int


def script(delay_s: float) -> Script:
    read = ScriptedToolCall(name="read_file", arguments={"path": "notes.txt"})
    return Script(
        turns=[
            Turn(tool_calls=[read], delay_s=delay_s),
            Turn(content="Read it; nothing to report.", delay_s=delay_s),
        ]
    )


async def post_run(http: httpx.AsyncClient, token: str, workspace: Path) -> tuple[str, float]:
    response = await http.post(
        "/v1/runs",
        headers={"authorization": f"Bearer {token}"},
        json={"agent": "investigate", "input": "Read notes.txt.", "workspace": str(workspace)},
    )
    if response.status_code != 201:
        raise SystemExit(f"POST /v1/runs answered {response.status_code}: {response.text}")
    return str(response.json()["id"]), time.time()


async def until_ended(store: Store, ids: list[str]) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        async with store.pool.connection() as conn:
            cur = await conn.execute(TIMES_SQL, (ids,))
            rows = {row["id"]: row for row in await cur.fetchall()}
        if len(rows) == len(ids) and all(r["finished"] is not None for r in rows.values()):
            return rows
        await asyncio.sleep(0.5)
    raise SystemExit(f"The runs did not all end within {DRAIN_TIMEOUT_S:.0f} s.")


async def one_mode(fairness: bool, runs: int, slots: int, delay_s: float) -> Figures:
    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    with tempfile.TemporaryDirectory(prefix="keel-fair-") as tmp:
        root = Path(tmp)
        workspace = root / "project"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("nothing to see here\n")
        temporal = TemporalDevServer(
            db_file=root / "temporal.sqlite",
            port=free_port(),
            log_file=root / "temporal.log",
            fairness=fairness,
        )
        await temporal.start()
        llm = ScriptedLLMServer(script(delay_s))
        llm.start()
        try:
            async with fresh_database(admin_url) as database_url:
                store = await Store.open(database_url)
                try:
                    await store.migrate()
                    settings = settings_from(
                        temporal_address=temporal.address,
                        database_url=database_url,
                        openai_base_url=llm.base_url,
                        openai_api_key="scripted",
                        model="scripted",
                        task_queue=f"fair-{uuid.uuid4().hex[:8]}",
                        data_dir=root / "data",
                        workspace_root=root,
                        api_port=free_port(),
                        jwt_secret=SECRET,
                        max_concurrent_activities=slots,
                    )
                    return await burst(settings, store, workspace, fairness, runs)
                finally:
                    await store.close()
        finally:
            llm.stop()
            await temporal.stop()


async def burst(
    settings: Settings, store: Store, workspace: Path, fairness: bool, runs: int
) -> Figures:
    client = await connect(settings.temporal_address)
    parts = build_worker(client, store, settings)
    token_a = dev_token(SECRET, "tenant-a", "alice")
    token_b = dev_token(SECRET, "tenant-b", "bob")
    async with (
        parts.worker,
        serve_api(settings) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        gate = asyncio.Semaphore(POST_CONCURRENCY)

        async def post_a() -> tuple[str, float]:
            async with gate:
                return await post_run(http, token_a, workspace)

        began = time.time()
        a_runs = await asyncio.gather(*(post_a() for _ in range(runs)))
        b_id, b_posted = await post_run(http, token_b, workspace)
        a_ids = [run_id for run_id, _ in a_runs]
        rows = await until_ended(store, [*a_ids, b_id])
    b = rows[b_id]
    return Figures(
        fairness=fairness,
        b_started_s=float(b["started"]) - b_posted,
        b_first_call_s=float(b["first_call"]) - b_posted,
        b_finished_s=float(b["finished"]) - b_posted,
        a_drained_s=max(float(rows[i]["finished"]) for i in a_ids) - began,
        a_failed=sum(1 for i in a_ids if rows[i]["status"] != "completed"),
    )


def print_table(results: list[Figures], runs: int, slots: int, delay_s: float) -> None:
    print(
        f"tenant A: {runs} runs (2 model steps + 1 read_file each), then tenant B: 1 run; "
        f"{slots} activity slots, model replies {delay_s:g} s late; load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'fairness':<10}{'B started, s':>14}{'B 1st call, s':>15}{'B done, s':>11}"
        f"{'A drained, s':>14}{'A failed':>10}"
    )
    for f in results:
        print(
            f"{'on' if f.fairness else 'off':<10}{f.b_started_s:>14.2f}{f.b_first_call_s:>15.2f}"
            f"{f.b_finished_s:>11.2f}{f.a_drained_s:>14.1f}{f.a_failed:>10}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fair_share", description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="tenant A's burst (1-2000)")
    parser.add_argument("--slots", type=int, default=8, help="the worker's activity slots")
    parser.add_argument("--delay", type=float, default=1.2, help="seconds per model reply")
    parser.add_argument("--only", choices=("on", "off"), help="one mode instead of both")
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= MAX_RUNS:
        parser.error(f"--runs must be between 1 and {MAX_RUNS}.")
    if args.slots < 1 or args.delay < 1.0:
        parser.error("--slots must be at least 1 and --delay at least 1.0 (a regular activity).")
    modes = [args.only == "on"] if args.only else [True, False]
    results = [asyncio.run(one_mode(m, args.runs, args.slots, args.delay)) for m in modes]
    print_table(results, args.runs, args.slots, args.delay)


if __name__ == "__main__":
    main()
