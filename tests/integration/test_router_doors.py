"""The router through the doors its first tests left out: `keel run auto` from the CLI,
MCP's `start_run` with agent `auto`, and retention emptying a purged router run's
`route_decisions`; and `keel run` of an agent the token's roles exclude. Real API,
worker, Temporal, Postgres and protocol clients."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from temporalio.client import Client, ScheduleActionExecutionStartWorkflow

from keel.activities.store.run_store import Store
from keel.api.core.retention import RETENTION_SCHEDULE_ID
from keel.api.identity.auth import dev_token
from keel.worker.scripted.llm import Script, Turn
from tests.conftest import JWT_SECRET, auth_headers, token_for
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import base_url
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_mcp import call, mcp_client
from tests.integration.test_retention import ADMIN, age, stale_schedule, swept
from tests.integration.test_router import ANSWER, GUARDED_BUILD, finished


async def test_keel_run_auto_and_mcp_start_run_auto_route_the_request(
    workspace: Path, tmp_path: Path, keel_app: LaunchKeel
) -> None:
    async with keel_app(Script(turns=[Turn(content=ANSWER)]), http_timeout=60) as http:
        url = base_url(http)
        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        code, out = await keel(
            "run", "auto", "Investigate the parser.", "--workspace", str(workspace), env=env
        )
        assert code == 0, out
        assert "Routed and answered." in out, out
        found = re.search(r"\b(run-\w+)", out)
        assert found is not None, out
        run = await finished(http, found.group(1))
        assert run["agent"] == "auto" and run["status"] == "completed" and run["trigger"] == "cli"
        assert [c["agent"] for c in run["children"]] == ["investigate"]

        async with mcp_client(url, token_for("default", "alice")) as client:
            listed = await call(client, "list_agents")
            assert listed["agents"][-1]["name"] == "auto"
            started = await call(
                client,
                "start_run",
                agent="auto",
                input="Review the code for bugs.",
                workspace=str(workspace),
            )
            assert started["agent"] == "auto"
            await finished(http, started["run_id"])
            detail = await call(client, "get_run", run_id=started["run_id"])
        assert detail["run"]["status"] == "completed" and detail["run"]["report"] == ANSWER
        assert [c["agent"] for c in detail["run"]["children"]] == ["review"]
        [decision] = (await http.get(f"/v1/runs/{started['run_id']}/route")).json()
        assert decision["outcome"] == "routed" and decision["agent"] == "review"


async def route_rows(store: Store, run_id: str) -> int:
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) AS n FROM route_decisions WHERE run_id = %s", (run_id,)
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def test_retention_empties_the_route_decisions_of_a_purged_router_run(
    temporal_client: Client, store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    tenant = f"ret-route-{uuid.uuid4().hex[:8]}"
    alice = auth_headers(tenant, "alice")
    script = Script(turns=[Turn(content=ANSWER)])
    async with keel_app(script, headers=alice, http_timeout=60) as http:
        ids = {}
        for task in ("Old review of the code.", "New review of the code."):
            body = {"agent": "auto", "input": task, "workspace": str(workspace)}
            started = await http.post("/v1/runs", json={**body, "route_only": True})
            assert started.status_code == 201, started.text
            ids[task] = started.json()["id"]
            assert (await finished(http, ids[task]))["status"] == "completed"
        old, new = ids["Old review of the code."], ids["New review of the code."]
        assert await route_rows(store, old) == 1 and await route_rows(store, new) == 1
        await age(store, old, tenant, "Old review of the code.", days=40)

        await stale_schedule(temporal_client)
        set_ = await http.put(
            f"/v1/admin/retention/tenants/{tenant}", headers=ADMIN, json={"days": 30}
        )
        assert set_.status_code == 200, set_.text
        schedule = temporal_client.get_schedule_handle(RETENTION_SCHEDULE_ID)
        earlier = {
            a.action.workflow_id
            for a in (await schedule.describe()).info.recent_actions
            if isinstance(a.action, ScheduleActionExecutionStartWorkflow)
        }
        try:
            assert (await http.post("/v1/admin/retention/sweeps", headers=ADMIN)).status_code == 202
            result = await swept(temporal_client, earlier)
            assert result.runs_purged >= 1
            # The purged router run's decisions are gone; the newer run keeps its own.
            assert await route_rows(store, old) == 0 and await route_rows(store, new) == 1
            gone = (await http.get(f"/v1/runs/{old}/route")).json()
            assert gone == []
        finally:
            await http.delete(f"/v1/admin/retention/tenants/{tenant}", headers=ADMIN)
            await schedule.delete()  # the session's Temporal server is shared with other tests


async def test_keel_run_of_an_agent_the_tokens_roles_exclude_is_refused(
    workspace: Path, tmp_path: Path, keel_app: LaunchKeel
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "build.md").write_text(GUARDED_BUILD)
    async with keel_app(Script(turns=[Turn(content="Built.")]), agents_dir=agents) as http:
        env = clean_env(
            KEEL_API_URL=base_url(http),
            KEEL_DATA_DIR=str(tmp_path / "cli"),
            KEEL_JWT_SECRET=JWT_SECRET,
        )
        # The CLI's own token carries no roles: build is refused, with the sentence.
        code, out = await keel("run", "build", "Build it.", "--workspace", str(workspace), env=env)
        assert code == 1, out
        assert "Your roles may not use the agent 'build'" in out, out
        developer = {"KEEL_TOKEN": dev_token(JWT_SECRET, "default", "dev", roles=("developer",))}
        code, out = await keel(
            "run",
            "build",
            "Build it.",
            "--workspace",
            str(workspace),
            env={**env, **developer},
        )
        assert code == 0 and "Built." in out, out
