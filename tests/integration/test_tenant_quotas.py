"""Tenant quotas: a tenant over its daily quota is refused at every door that starts a run,
with 429, Retry-After and the sentence naming the quota and its reset; another tenant is
unaffected; the quota resets when the day's counter is yesterday's; a running run stops
with `budget` after the step that reached it; only admins set quotas, and bad values are
refused. Real API, worker, Temporal, Postgres and protocol clients (A2A over JSON-RPC,
MCP, the LangGraph SDK); the scripted model keeps calling tools where it matters.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import RateLimitError
from temporalio.client import Client
from temporalio.worker import Replayer

from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.worker.scripted.llm import Script, Turn
from keel.worker.temporal_client import DATA_CONVERTER
from keel.workflows.run.agent_run import AgentRunWorkflow
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import LaunchKeel, base_url, finished
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_langgraph import langgraph
from tests.integration.test_mcp import mcp_client
from tests.integration.test_mcp import refused as tool_error
from tests.integration.test_subagents import read
from tests.integration.test_surface_parity import text_message

ADMIN = auth_headers("ops", "root", "keel:admin")
HISTORIES = Path(__file__).parent.parent / "histories"
# A model that never stops calling tools (each call new, so it seems to make progress):
# only a limit ends its runs.
FILES = ("pkg/core.py", "pkg/__init__.py", "README.md")
RELENTLESS = Script(turns=[Turn(tool_calls=[read(FILES[i % 3])]) for i in range(12)])


def tenant(prefix: str = "quota") -> tuple[str, dict[str, str]]:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    return name, auth_headers(name, "alice")


def tomorrow_utc() -> str:
    return (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT00:00:00Z")


async def set_quota(http: httpx.AsyncClient, name: str, **ceilings: Any) -> dict[str, Any]:
    response = await http.put(f"/v1/admin/quotas/tenants/{name}", headers=ADMIN, json=ceilings)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def start(
    http: httpx.AsyncClient, workspace: Path, headers: dict[str, str], agent: str = "investigate"
) -> httpx.Response:
    return await http.post(
        "/v1/runs",
        json={"agent": agent, "input": "Look at pkg/core.py.", "workspace": str(workspace)},
        headers=headers,
    )


async def replays(temporal_client: Client, run_id: str, name: str) -> None:
    """The run's history replays on today's workflow code (KEEL_RECORD_HISTORY=1: and is
    kept in tests/histories, which `test_replay.py` replays from then on)."""
    history = await temporal_client.get_workflow_handle(run_id).fetch_history()
    replayer = Replayer(workflows=[AgentRunWorkflow], data_converter=DATA_CONVERTER)
    assert (await replayer.replay_workflow(history)).replay_failure is None
    if os.environ.get("KEEL_RECORD_HISTORY"):
        (HISTORIES / f"{name}.json").write_text(json.dumps(history.to_json_dict(), indent=1))


def assert_refused(response: httpx.Response, sentence: str, within_s: int = 86_400) -> None:
    """A 429 with Retry-After up to the period's end (the next UTC midnight), and the sentence."""
    assert response.status_code == 429, response.text
    wait = int(response.headers["retry-after"])
    assert 0 < wait <= within_s, wait
    assert sentence in response.text, response.text


async def test_a_tenant_over_its_daily_quota_is_refused_at_every_door_until_it_resets(
    keel_app: LaunchKeel, store: Store, workspace: Path, temporal_client: Client
) -> None:
    name, alice = tenant()
    _, carol = tenant("other")
    ws = str(workspace)
    async with keel_app(
        Script(turns=[Turn(content="done")]), headers=alice, http_timeout=60
    ) as http:
        quota = await set_quota(http, name, tokens_per_day=50)
        assert quota["tenant_id"] == name and quota["tokens_per_day"] == 50
        # Under its quota, a run starts; its one call (120 tokens) takes the tenant past it.
        first = await start(http, workspace, alice)
        assert first.status_code == 201, first.text
        assert (await finished(http, first.json()["id"], alice))["status"] == "completed"
        mine = (await http.get("/v1/usage/quota")).json()
        [line] = mine["lines"]
        assert (line["period"], line["measure"], line["limit"]) == ("day", "tokens", 50)
        assert line["used"] >= 120 and line["remaining"] == 0 and line["reached"]
        assert line["resets_at"].startswith(tomorrow_utc()[:10])
        sentence = f"Tenant {name} has reached its daily token quota"
        assert mine["refused"].startswith(sentence)
        assert f"resets at {tomorrow_utc()}" in mine["refused"]

        # REST.
        assert_refused(await start(http, workspace, alice), sentence)
        # A session's message starts a run too.
        session = await http.post("/v1/sessions", json={"agent": "investigate", "workspace": ws})
        assert session.status_code == 201, session.text
        message = await http.post(
            f"/v1/sessions/{session.json()['id']}/messages", json={"input": "Hello."}
        )
        assert_refused(message, sentence)
        # A2A SendMessage: the same status and header, a JSON-RPC error with the sentence.
        sent = await http.post(
            "/a2a/investigate",
            json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": text_message("x")},
            headers={"A2A-Version": "1.0"},
        )
        assert_refused(sent, sentence)
        error = sent.json()["error"]
        assert error["code"] == -32000 and error["message"].startswith(sentence)
        assert f"resets at {tomorrow_utc()}" in error["message"]
        # MCP start_run: a tool error with the sentence.
        async with mcp_client(base_url(http), token_for(name, "alice")) as mcp:
            said = await tool_error(mcp, "start_run", agent="investigate", input="x", workspace=ws)
        assert sentence in said and tomorrow_utc() in said, said
        # The LangGraph-compatible API: the SDK's 429 with the sentence.
        with pytest.raises(RateLimitError) as raised:
            await langgraph(http, "alice", name).runs.create(
                None, "investigate", input={"messages": [{"role": "user", "content": "x"}]}
            )
        assert sentence in raised.value.response.text

        # A schedule fires through Temporal: the run it starts ends refused, and says why;
        # the schedule itself carries on.
        made = await http.post(
            "/v1/schedules",
            json={
                "agent": "investigate",
                "input": "Nightly look.",
                "workspace": ws,
                "cron_expressions": ["0 3 1 1 *"],
            },
        )
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        try:
            triggered = await http.post(f"/v1/schedules/{sid}/trigger")
            assert triggered.status_code == 202, triggered.text
            fired = await finished(http, triggered.json()["run_id"], alice)
            assert (await http.get(f"/v1/schedules/{sid}")).status_code == 200
        finally:
            await http.delete(f"/v1/schedules/{sid}")
        assert (fired["status"], fired["stop_reason"], fired["steps"]) == ("failed", "budget", 0)
        assert fired["error"].startswith(sentence) and tomorrow_utc() in fired["error"]
        await replays(temporal_client, fired["id"], "agent_run_quota_schedule")

        # Another tenant is unaffected.
        theirs = await start(http, workspace, carol)
        assert theirs.status_code == 201, theirs.text
        assert (await finished(http, theirs.json()["id"], carol))["status"] == "completed"

        # The day turns: today's counter becomes yesterday's, and the quota holds again.
        async with store.pool.connection() as conn:
            await conn.execute(
                "UPDATE tenant_usage_days SET day = day - 1 WHERE tenant_id = %s", (name,)
            )
        after = await start(http, workspace, alice)
        assert after.status_code == 201, after.text
        assert (await finished(http, after.json()["id"], alice))["status"] == "completed"

    refusals = [
        e
        for e in await AuditLog(store.pool).entries(name, limit=1000)
        if e.action == "quota.refused"
    ]
    # One entry per refusal, whichever door (a session's message is the API's).
    assert [e.detail["via"] for e in refusals] == ["api", "api", "a2a", "api", "api", "schedule"]
    assert all(e.detail["period"] == "day" and e.actor == "alice" for e in refusals)


async def test_a_running_run_stops_with_budget_after_the_step_that_reached_the_quota(
    keel_app: LaunchKeel, temporal_client: Client, workspace: Path
) -> None:
    name, alice = tenant()
    async with keel_app(RELENTLESS, headers=alice, http_timeout=60) as http:
        await set_quota(http, name, tokens_per_day=300)
        created = await start(http, workspace, alice)
        assert created.status_code == 201, created.text
        run = await finished(http, created.json()["id"], alice)

    # Each call reports 120 tokens: the third reaches 300. That step's tool call still ran;
    # no fourth call was made, though the model asked for more.
    assert (run["status"], run["stop_reason"]) == ("completed", "budget"), run
    assert run["steps"] == 3 and run["tool_calls"] == 3, run
    assert run["error"].startswith(f"Tenant {name} has reached its daily token quota"), run
    assert "stopped (budget)" in run["report"]
    await replays(temporal_client, run["id"], "agent_run_quota_stop")


async def test_a_users_own_quota_refuses_them_and_not_the_rest_of_the_tenant(
    keel_app: LaunchKeel, workspace: Path
) -> None:
    name, alice = tenant()
    bob = auth_headers(name, "bob")
    async with keel_app(Script(turns=[Turn(content="done")]), headers=alice) as http:
        response = await http.put(
            f"/v1/admin/quotas/tenants/{name}",
            params={"user": "alice"},
            headers=ADMIN,
            json={"cost_usd_per_month": 0},
        )
        assert response.status_code == 200, response.text
        assert response.json()["user_id"] == "alice"
        assert_refused(
            await start(http, workspace, alice),
            f"User alice has reached their monthly cost quota in tenant {name}",
            within_s=31 * 86_400,
        )
        assert (await start(http, workspace, bob)).status_code == 201
        shown = (await http.get(f"/v1/admin/quotas/tenants/{name}", headers=ADMIN)).json()
        assert [q["user_id"] for q in shown["quotas"]] == ["alice"]
        cleared = await http.delete(
            f"/v1/admin/quotas/tenants/{name}", params={"user": "alice"}, headers=ADMIN
        )
        assert cleared.status_code == 204
        # The process that cleared it sees it gone at once.
        assert (await start(http, workspace, alice)).status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tokens_per_day": -1}, "tokens_per_day"),
        ({"cost_usd_per_day": "lots"}, "cost_usd_per_day"),
        ({"tokens_per_month": 10**15}, "tokens_per_month"),
        ({"tokens_per_week": 5}, "tokens_per_week"),
        ({}, "Set at least one"),
    ],
)
async def test_invalid_quotas_are_refused_and_change_nothing(
    keel_app: LaunchKeel, body: dict[str, Any], field: str
) -> None:
    name, _ = tenant()
    async with keel_app(Script(turns=[Turn(content="done")])) as http:
        response = await http.put(f"/v1/admin/quotas/tenants/{name}", headers=ADMIN, json=body)
        assert response.status_code == 422, response.text
        assert field in response.text
        missing = await http.get(f"/v1/admin/quotas/tenants/{name}", headers=ADMIN)
        assert missing.status_code == 404 and "has no quota" in missing.text


async def test_only_admins_set_or_read_quotas_and_a_refusal_is_audited(
    keel_app: LaunchKeel, store: Store
) -> None:
    name, alice = tenant()
    async with keel_app(Script(turns=[Turn(content="done")]), headers=alice) as http:
        put = await http.put(f"/v1/admin/quotas/tenants/{name}", json={"tokens_per_day": 1})
        assert put.status_code == 403 and "keel:admin" in put.text, put.text
        assert (await http.get("/v1/admin/quotas")).status_code == 403
        assert (await http.delete(f"/v1/admin/quotas/tenants/{name}")).status_code == 403
        # Nothing was set: alice's own view shows no quota.
        mine = (await http.get("/v1/usage/quota")).json()
        assert mine == {"tenant_id": name, "quotas": [], "lines": [], "refused": None}
        await asyncio.sleep(0)
    refused = [
        e.action
        for e in await AuditLog(store.pool).entries(name, limit=100)
        if e.action.startswith("quota.")
    ]
    assert refused == ["quota.set.refused", "quota.read.refused", "quota.clear.refused"]


@pytest.mark.slow  # five `keel` processes
async def test_the_cli_sets_shows_and_clears_quotas_and_shows_usage_and_remaining(
    keel_app: LaunchKeel, workspace: Path, tmp_path: Path
) -> None:
    name, alice = tenant()
    async with keel_app(Script(turns=[Turn(content="done")]), headers=alice) as http:
        env = clean_env(KEEL_API_URL=base_url(http), KEEL_DATA_DIR=str(tmp_path / "cli"))
        admin = {**env, "KEEL_TOKEN": token_for("ops", "root", "keel:admin")}
        code, out = await keel(
            "quota", "set", "--tenant", name, "--tokens-per-day", "-5", env=admin
        )
        assert code == 1 and "--tokens-per-day" in out, out
        code, out = await keel(
            "quota", "set", "--tenant", name, "--tokens-per-day", "1000", env=admin
        )
        assert code == 0 and f"Tenant {name}: quota set (tokens-per-day 1000)." in out, out
        created = await start(http, workspace, alice)
        assert (await finished(http, created.json()["id"], alice))["status"] == "completed"
        code, out = await keel("usage", env={**env, "KEEL_TOKEN": token_for(name, "alice")})
        assert code == 0, out
        assert "investigate" in out and "1,000" in out and "880" in out, out  # 120 used
        code, out = await keel("quota", "show", "--tenant", name, env=admin)
        assert code == 0 and "tenant" in out and "880" in out, out
        code, out = await keel("quota", "clear", "--tenant", name, env=admin)
        assert code == 0 and f"Tenant {name}: no quota." in out, out
