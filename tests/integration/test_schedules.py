"""Schedules on the real dev server: runs they start, pause, trigger, overlap, backfill,
validation, approvals with signed webhooks, and tenancy."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.activities.webhooks.signature import verify_signature
from keel.api.core.schedules.schemas import ScheduleCreate
from keel.api.core.schedules.specs import fire_times
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import LaunchKeel, StartLLM, base_url, eventually, run_reaches
from tests.integration.test_cli import clean_env, keel

UNUSED = Script(turns=[Turn(content="unused")])


def tenant_headers(sub: str = "alice") -> tuple[str, dict[str, str]]:
    """A tenant of its own for each test, so lists only hold that test's schedules."""
    tenant = f"sched-{uuid.uuid4().hex[:8]}"
    return tenant, auth_headers(tenant, sub)


async def create(http: httpx.AsyncClient, workspace: Path, **fields: Any) -> dict[str, Any]:
    body = {"agent": "review", "input": "Review what changed.", "workspace": str(workspace)}
    response = await http.post("/v1/schedules", json=body | fields)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def describe(http: httpx.AsyncClient, schedule_id: str) -> dict[str, Any]:
    response = await http.get(f"/v1/schedules/{schedule_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def schedule_runs(http: httpx.AsyncClient, schedule_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/v1/schedules/{schedule_id}/runs", params={"limit": 200})
    assert response.status_code == 200, response.text
    return list(response.json()["runs"])


async def completed_runs(http: httpx.AsyncClient, schedule_id: str) -> list[dict[str, Any]]:
    return [r for r in await schedule_runs(http, schedule_id) if r["status"] == "completed"]


class Receiver:
    """A webhook receiver on 127.0.0.1 that keeps what it is sent, after failing at first."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.attempts = 0
        self.received: list[tuple[dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver._lock:
                    receiver.attempts += 1
                    failing = receiver.attempts <= receiver.fail_first
                    if not failing:
                        headers = {k.lower(): v for k, v in self.headers.items()}
                        receiver.received.append((headers, body))
                self.send_response(503 if failing else 204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hooks/keel"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    async def notice(self, event: str) -> tuple[dict[str, str], bytes]:
        async def find() -> tuple[dict[str, str], bytes] | None:
            with self._lock:
                for headers, body in self.received:
                    if json.loads(body)["event"] == event:
                        return headers, body
            return None

        return await eventually(find, f"a {event} notice")


@pytest.mark.realtime  # real fires 2 s apart, and 5 s of a paused schedule firing nothing
async def test_an_interval_schedule_runs_and_obeys_pause_unpause_and_trigger(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    script = Script(turns=[Turn(content="Nothing changed that needs attention.")])
    _, headers = tenant_headers()
    async with keel_app(script, headers=headers) as http:
        schedule = await create(http, workspace, interval_s=2)
        sid = schedule["id"]
        try:
            assert schedule["interval_s"] == 2 and not schedule["paused"]
            gaps = {
                (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()
                for a, b in itertools.pairwise(schedule["next_fire_times"])
            }
            assert gaps == {2.0}

            async def two_done() -> list[dict[str, Any]] | None:
                done = await completed_runs(http, sid)
                return done if len(done) >= 2 else None

            done = await eventually(two_done, "two completed scheduled runs")
            assert all(r["id"].startswith(f"run-{sid}-") for r in done)
            listed = {r["id"]: r for r in (await http.get("/v1/runs")).json()["runs"]}
            for run in done:
                assert listed[run["id"]]["trigger"] == "schedule"
                assert listed[run["id"]]["report"] == "Nothing changed that needs attention."
            events = (await http.get(f"/v1/runs/{done[0]['id']}/events")).json()["events"]
            assert events[0]["type"] == "run_started"
            assert events[0]["data"]["trigger"] == "schedule"
            assert events[0]["data"]["schedule_id"] == sid
            assert events[-1]["type"] == "done"

            paused = await http.post(f"/v1/schedules/{sid}/pause", json={"note": "holiday"})
            assert paused.status_code == 200
            assert paused.json()["paused"] and paused.json()["note"] == "holiday"
            await asyncio.sleep(0.5)  # a fire at the very moment of pausing may still start
            started = (await describe(http, sid))["runs_started"]
            await asyncio.sleep(4.5)
            assert (await describe(http, sid))["runs_started"] == started

            resumed = await http.post(f"/v1/schedules/{sid}/unpause", json={"note": "back"})
            assert resumed.status_code == 200 and not resumed.json()["paused"]

            async def fired_again() -> bool:
                return bool((await describe(http, sid))["runs_started"] > started)

            await eventually(fired_again, "a fire after unpausing", within=6)

            await http.post(f"/v1/schedules/{sid}/pause")
            # Temporal names a run after the second it starts in: one more in the same
            # second as the last fire would collide with it.
            await asyncio.sleep(1.1)
            triggered = await http.post(f"/v1/schedules/{sid}/trigger")
            assert triggered.status_code == 202, triggered.text
            run_id = triggered.json()["run_id"]
            assert run_id is not None and run_id.startswith(f"run-{sid}-")
            run = await run_reaches(http, run_id)
            assert run["status"] == "completed" and run["trigger"] == "schedule"
            detail = await describe(http, sid)
            assert run_id in [r["run_id"] for r in detail["recent_runs"]]
        finally:
            assert (await http.delete(f"/v1/schedules/{sid}")).status_code == 204
        assert (await http.get(f"/v1/schedules/{sid}")).status_code == 404
        assert len(await schedule_runs(http, sid)) >= 4  # runs outlive their schedule


async def test_overlap_skip_skips_fires_while_a_run_is_still_going(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(Script(turns=[Turn(content="A slow review.")]))
    llm.hold()  # the first run is still going for as long as the test watches
    _, headers = tenant_headers()
    with Receiver() as receiver:
        async with keel_app(llm, headers=headers) as http:
            sid = (
                await create(
                    http, workspace, interval_s=1, overlap="skip", webhook_url=receiver.url
                )
            )["id"]
            try:

                async def running() -> dict[str, Any] | None:
                    detail = await describe(http, sid)
                    return detail if detail["running_runs"] else None

                first = (await eventually(running, "the first run"))["running_runs"][0]

                async def two_skipped() -> dict[str, Any] | None:
                    detail = await describe(http, sid)
                    return detail if detail["skipped_overlap"] >= 2 else None

                detail = await eventually(two_skipped, "two fires skipped", within=10)
                assert detail["runs_started"] == 1
                assert detail["running_runs"] == [first]
                assert detail["skipped_overlap"] >= 2
                assert [r["id"] for r in await schedule_runs(http, sid)] == [first]
            finally:
                await http.delete(f"/v1/schedules/{sid}")
            await http.post(f"/v1/runs/{first}/cancel")
            _, notice = await receiver.notice("run.finished")
            assert json.loads(notice)["status"] == "cancelled"
            assert json.loads(notice)["run_id"] == first


async def test_backfill_starts_one_run_per_fire_time_in_the_range(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    script = Script(turns=[Turn(content="Backfilled review.")])
    _, headers = tenant_headers()
    async with keel_app(script, headers=headers) as http:
        sid = (await create(http, workspace, cron_expressions=["0 * * * *"], paused=True))["id"]
        try:
            path = f"/v1/schedules/{sid}/backfill"
            accepted = await http.post(
                path,
                json={
                    "start": "2024-01-01T00:00:00Z",
                    "end": "2024-01-01T03:00:00Z",
                    "overlap": "allow_all",
                },
            )
            assert accepted.status_code == 202, accepted.text
            assert accepted.json()["fire_times"] == 4

            async def four_done() -> list[dict[str, Any]] | None:
                done = await completed_runs(http, sid)
                return done if len(done) == 4 else None

            done = await eventually(four_done, "four backfilled runs")
            assert {r["id"] for r in done} == {
                f"run-{sid}-2024-01-01T0{hour}:00:00Z" for hour in range(4)
            }
            assert {r["trigger"] for r in done} == {"schedule"}

            too_many = await http.post(
                path, json={"start": "2024-01-01T00:00:00Z", "end": "2025-01-01T00:00:00Z"}
            )
            assert too_many.status_code == 422 and too_many.json()["detail"][0]["loc"][-1] == "end"
            empty = await http.post(
                path, json={"start": "2024-01-01T00:10:00Z", "end": "2024-01-01T00:20:00Z"}
            )
            assert empty.status_code == 422 and empty.json()["detail"][0]["loc"][-1] == "start"
            naive = await http.post(
                path, json={"start": "2024-01-01T00:00:00", "end": "2024-01-01T03:00:00Z"}
            )
            assert naive.status_code == 422
            await asyncio.sleep(0.5)
            assert len(await schedule_runs(http, sid)) == 4
        finally:
            await http.delete(f"/v1/schedules/{sid}")


async def test_keel_previews_the_fire_times_temporal_computes(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    _, headers = tenant_headers()
    async with keel_app(UNUSED, headers=headers) as http:
        # The second fires only on the 1st when it is a Monday: Temporal ANDs the day fields.
        for crons in (["*/15 9-17 * * MON-FRI"], ["0 0 1 * MON"], ["30 2 * * *", "@weekly"]):
            made = await create(
                http, workspace, cron_expressions=crons, time_zone="Europe/Berlin", paused=True
            )
            try:
                fields = {k: v for k, v in made.items() if k in ScheduleCreate.model_fields}
                config = ScheduleCreate.model_validate(fields)
                expected = fire_times(config, datetime.now(UTC), limit=5)
                temporal_says = [datetime.fromisoformat(t) for t in made["next_fire_times"][:5]]
                assert temporal_says == expected, crons
            finally:
                await http.delete(f"/v1/schedules/{made['id']}")


async def test_invalid_schedules_are_422s_naming_the_field_and_create_nothing(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    _, headers = tenant_headers()
    async with keel_app(UNUSED, headers=headers) as http:
        sid = f"bad-{uuid.uuid4().hex[:8]}"
        good = {
            "schedule_id": sid,
            "agent": "review",
            "input": "Review.",
            "workspace": str(workspace),
            "cron_expressions": ["0 2 * * *"],
        }
        cases: list[tuple[dict[str, Any], str, str]] = [
            ({"cron_expressions": ["61 2 * * *"]}, "cron_expressions", "out of range"),
            ({"cron_expressions": ["0 2 * *"]}, "cron_expressions", "five"),
            ({"cron_expressions": ["0 0 31 2 *"]}, "cron_expressions", "never fires"),
            ({"agent": "nobody"}, "agent", "Unknown agent"),
            ({"time_zone": "Mars/Olympus_Mons"}, "time_zone", "Unknown time zone"),
            ({"workspace": "/"}, "workspace", "outside"),
            ({"interval_s": 60}, "cron_expressions", "either"),
            ({"cron_expressions": []}, "cron_expressions", "either"),
            ({"webhook_url": "ftp://example.com/x"}, "webhook_url", "http"),
            ({"overlap": "sometimes"}, "overlap", ""),
        ]
        for change, field, words in cases:
            response = await http.post("/v1/schedules", json=good | change)
            assert response.status_code == 422, (change, response.text)
            [problem] = response.json()["detail"]
            assert field in problem["loc"], (change, problem)
            assert words in problem["msg"], (change, problem)
        assert (await http.get(f"/v1/schedules/{sid}")).status_code == 404
        assert (await http.get("/v1/schedules")).json()["schedules"] == []

        made = await create(http, workspace, schedule_id=sid, cron_expressions=["0 2 * * *"])
        taken = await http.post("/v1/schedules", json=good)
        assert taken.status_code == 409 and "schedule_id" in taken.text
        refused = await http.patch(
            f"/v1/schedules/{sid}", json={"cron_expressions": ["0 25 * * *"]}
        )
        assert refused.status_code == 422 and "cron_expressions" in refused.text
        assert (await describe(http, sid))["cron_expressions"] == ["0 2 * * *"]
        changed = await http.patch(
            f"/v1/schedules/{sid}",
            json={"interval_s": 3600, "input": "Review again.", "time_zone": "Asia/Tokyo"},
        )
        assert changed.status_code == 200, changed.text
        after = changed.json()
        assert after["interval_s"] == 3600 and after["cron_expressions"] == []
        assert after["input"] == "Review again." and after["time_zone"] == "Asia/Tokyo"
        assert after["created_by"] == made["created_by"] == "user:alice"
        await http.delete(f"/v1/schedules/{sid}")


async def test_a_scheduled_approval_notifies_the_webhook_signed_and_expires(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    write = ScriptedToolCall(name="write_file", arguments={"path": "notes.txt", "content": "x"})
    script = Script(
        turns=[Turn(tool_calls=[write]), Turn(content="Nobody approved; nothing written.")]
    )
    tenant, headers = tenant_headers()
    with Receiver(fail_first=1) as receiver:
        async with keel_app(script, headers=headers) as http:
            sid = (
                await create(
                    http,
                    workspace,
                    agent="build",
                    input="Write the notes.",
                    cron_expressions=["0 3 * * *"],
                    paused=True,
                    approver="user:bob",
                    approval_expires_after_s=2,
                    webhook_url=receiver.url,
                )
            )["id"]
            try:
                run_id = (await http.post(f"/v1/schedules/{sid}/trigger")).json()["run_id"]
                assert run_id

                async def asked() -> list[dict[str, Any]] | None:
                    items = (await http.get(f"/v1/runs/{run_id}/interactions")).json()
                    return items if isinstance(items, list) and items else None

                [ia] = await eventually(asked, "an approval request")
                assert ia["approvers"] == ["user:alice", "user:bob"]

                headers_, body = await receiver.notice("run.waiting")
                secret = (await http.get("/v1/webhooks/signing-secret")).json()["secret"]
                assert verify_signature(secret, headers_["x-keel-signature"], body)
                assert not verify_signature(secret, headers_["x-keel-signature"], body + b" ")
                other = auth_headers("someone-else", "eve")
                their = (await http.get("/v1/webhooks/signing-secret", headers=other)).json()
                assert not verify_signature(their["secret"], headers_["x-keel-signature"], body)
                waiting = json.loads(body)
                assert waiting["run_id"] == run_id and waiting["tenant_id"] == tenant
                assert waiting["status"] == "waiting" and waiting["schedule_id"] == sid
                assert [i["id"] for i in waiting["interactions"]] == [ia["id"]]
                assert waiting["interactions"][0]["approvers"] == ["user:alice", "user:bob"]
                assert headers_["x-keel-delivery"] == waiting["id"]
                assert int(headers_["x-keel-attempt"]) == 2  # the first answer was a 503

                run = await run_reaches(http, run_id)
                assert run["status"] == "completed"
                assert run["report"] == "Nobody approved; nothing written."
                [expired] = (await http.get(f"/v1/runs/{run_id}/interactions")).json()
                assert expired["status"] == "expired"
                headers_, body = await receiver.notice("run.finished")
                assert verify_signature(secret, headers_["x-keel-signature"], body)
                finished = json.loads(body)
                assert finished["status"] == "completed" and finished["run_id"] == run_id
                assert finished["stop_reason"] == "final_answer"
                assert finished["report_preview"] == "Nobody approved; nothing written."
            finally:
                await http.delete(f"/v1/schedules/{sid}")
    assert not (workspace / "notes.txt").exists()


async def test_another_tenant_cannot_see_or_touch_a_schedule(
    store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    _, alice = tenant_headers("alice")
    mallory_tenant, mallory = tenant_headers("mallory")
    async with keel_app(UNUSED, headers=alice) as http:
        sid = (await create(http, workspace, cron_expressions=["0 4 * * *"], paused=True))["id"]
        try:

            async def listed() -> bool:
                schedules = (await http.get("/v1/schedules")).json()["schedules"]
                return sid in [s["id"] for s in schedules]

            await eventually(listed, "the schedule in its tenant's list")
            theirs = (await http.get("/v1/schedules", headers=mallory)).json()["schedules"]
            assert sid not in [s["id"] for s in theirs]
            for method, path, body in (
                ("GET", f"/v1/schedules/{sid}", None),
                ("POST", f"/v1/schedules/{sid}/trigger", None),
                ("POST", f"/v1/schedules/{sid}/pause", {"note": "mine now"}),
                ("POST", f"/v1/schedules/{sid}/unpause", None),
                ("PATCH", f"/v1/schedules/{sid}", {"input": "Exfiltrate."}),
                (
                    "POST",
                    f"/v1/schedules/{sid}/backfill",
                    {"start": "2024-01-01T00:00:00Z", "end": "2024-01-02T00:00:00Z"},
                ),
                ("DELETE", f"/v1/schedules/{sid}", None),
            ):
                response = await http.request(method, path, headers=mallory, json=body)
                assert response.status_code == 404, (method, path, response.text)
            detail = await describe(http, sid)
            assert detail["runs_started"] == 0 and detail["paused"]
            assert detail["input"] == "Review what changed."
        finally:
            assert (await http.delete(f"/v1/schedules/{sid}")).status_code == 204
    denied = [
        e
        for e in await AuditLog(store.pool).entries(mallory_tenant, limit=100)
        if e.action == "schedule.cross_tenant_denied"
    ]
    assert len(denied) == 7 and {e.subject for e in denied} == {sid}


@pytest.mark.slow  # five `keel` processes, each importing the CLI
async def test_the_cli_manages_a_schedule_through_the_api(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    script = Script(turns=[Turn(content="From the command line.")])
    tenant, headers = tenant_headers()
    sid = f"cli-{uuid.uuid4().hex[:8]}"
    async with keel_app(script, headers=headers) as http:
        env = clean_env(KEEL_API_URL=base_url(http), KEEL_TOKEN=token_for(tenant))
        code, out = await keel(
            "schedules", "create", "review", "Review the night's changes.",
            "--cron", "0 2 * * MON-FRI", "--tz", "Europe/Berlin", "--id", sid,
            "--workspace", str(workspace), "--paused", env=env,
        )  # fmt: skip
        assert code == 0, out
        assert "Fires 0 2 * * MON-FRI (Europe/Berlin); next 5:" in out
        # In the schedule's zone, named with its offset, as the console shows them.
        assert len(re.findall(r" 02:00:00 Europe/Berlin \(UTC\+0[12]:00\)", out)) == 5, out
        assert "Sat " not in out and "Sun " not in out
        assert f"Schedule {sid} created (paused)." in out

        code, out = await keel("schedules", "trigger", sid, env=env)
        assert code == 0, out
        run_id = re.search(rf"started run (run-{sid}-\S+)", out)
        assert run_id is not None, out
        assert (await run_reaches(http, run_id.group(1)))["report"] == "From the command line."

        code, out = await keel("schedules", "show", sid, env=env)
        assert code == 0 and "review 0 2 * * MON-FRI (Europe/Berlin)" in out, out
        assert "UTC" not in out.replace("(UTC+01:00)", "").replace("(UTC+02:00)", ""), out
        assert run_id.group(1) in out and "completed" in out

        code, out = await keel("schedules", "delete", sid, "--yes", env=env)
        assert code == 0 and f"{sid}: deleted" in out, out
        code, out = await keel("schedules", "pause", sid, env=env)
        assert code == 1 and f"error: No schedule {sid}." in out, out
