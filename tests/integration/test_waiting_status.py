"""A run that waits on a person reads `waiting`, not `running`, wherever runs are listed
or shown: REST (list, filter, one run), the CLI and MCP's list_runs. The wait may be a
sub-agent's: a lead whose build child asks to write a file waits too."""

from __future__ import annotations

from pathlib import Path

import httpx

from keel.worker.scripted.llm import Script, Turn
from tests.conftest import JWT_SECRET, token_for
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import base_url, finished, pending
from tests.integration.test_approvals import decide
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_mcp import call, mcp_client
from tests.integration.test_subagents import LEAD, build_child, task


async def listed(http: httpx.AsyncClient, **params: str) -> dict[str, str]:
    response = await http.get("/v1/runs", params={"limit": 200, **params})
    assert response.status_code == 200, response.text
    return {str(r["id"]): str(r["status"]) for r in response.json()["runs"]}


async def test_a_run_whose_sub_agent_waits_for_approval_reads_waiting_everywhere(
    workspace: Path, tmp_path: Path, keel_app: LaunchKeel
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "lead.md").write_text(LEAD)
    script = Script(
        turns=[
            Turn(tool_calls=[task("build", "CHILD-BUILD: write notes/out.txt saying hello")]),
            Turn(content="The build agent reported back."),
        ],
        conversations=[build_child()],
    )
    async with keel_app(script, agents_dir=agents) as http:
        url = base_url(http)
        created = await http.post(
            "/v1/runs",
            json={"agent": "lead", "input": "Add the notes.", "workspace": str(workspace)},
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        [ia] = await pending(http, run_id)

        assert (await listed(http))[run_id] == "waiting"
        assert run_id in await listed(http, status="waiting")
        assert run_id not in await listed(http, status="running")
        assert (await http.get(f"/v1/runs/{run_id}")).json()["status"] == "waiting"

        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        # Only the waiting runs (other tests' runs share this database), in an 80-column
        # terminal: however long the others' ids, the status column stays readable.
        listing = ("runs", "list", "--status", "waiting", "--limit", "200")
        code, out = await keel(*listing, env={**env, "COLUMNS": "80"})
        assert code == 0, out
        line = next(x for x in out.splitlines() if run_id in x)
        assert "waiting" in line and "running" not in line, out
        async with mcp_client(url, token_for("default", "alice")) as client:
            runs = (await call(client, "list_runs", limit=200))["runs"]
            assert next(r for r in runs if r["id"] == run_id)["status"] == "waiting"

        assert (await decide(http, run_id, ia)).status_code == 200
        assert (await finished(http, run_id))["status"] == "completed"
        assert (await listed(http))[run_id] == "completed"
        assert run_id not in await listed(http, status="waiting")
