"""Workspaces belong to a tenant (issue 31, #1), found as the attack found it: another
tenant naming tenant A's workspace on every door that starts work — REST runs, sessions
and schedules, MCP `start_run` (and its read tools), A2A, LangGraph and AG-UI — gets the
answer a missing workspace gets, audited as a cross-tenant refusal; and a schedule made
before the boundary that names another tenant's directory runs no tool there when fired.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from langgraph_sdk.errors import UnprocessableEntityError
from temporalio.client import Client as TemporalClient

from keel.activities.store.run_store import Store
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import MakeSettings, StartLLM, finished, keel_api
from tests.integration.test_langgraph import langgraph
from tests.integration.test_mcp import mcp_client, refused
from tests.integration.test_surface_parity import text_message

DONE = Script(turns=[Turn(content="done")])
NOT_FOUND = "No workspace"


def tenant_roots(root: Path, *tenants: str) -> dict[str, Path]:
    """A project in each tenant's directory under the root."""
    projects = {}
    for tenant in tenants:
        project = root / tenant / "proj"
        project.mkdir(parents=True)
        (project / "README.md").write_text(f"# {tenant}'s secret plans\n")
        projects[tenant] = project
    return projects


async def denials(store: Store, tenant: str) -> list[str]:
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT subject FROM audit_log WHERE tenant_id = %s "
            "AND action = 'workspace.cross_tenant_denied' ORDER BY id",
            (tenant,),
        )
        return [row["subject"] for row in await cur.fetchall()]


async def test_another_tenants_workspace_is_not_found_on_any_door(
    temporal_client: TemporalClient,
    store: Store,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    acme, globex = f"acme-{uuid.uuid4().hex[:6]}", f"globex-{uuid.uuid4().hex[:6]}"
    root = tmp_path / "workspaces"
    projects = tenant_roots(root, acme, globex)
    theirs = str(projects[acme])
    sideways = f"../{acme}/proj"  # relative to globex's own root
    settings = settings_for(
        scripted(DONE), root, api_port=free_port(), workspace_tenancy="per-tenant"
    )
    mallory = auth_headers(globex, "mallory")
    ask = {"messages": [{"role": "user", "content": "Read their code."}]}

    async with (
        keel_api(temporal_client, store, settings, headers=mallory, http_timeout=60) as http,
        mcp_client(str(http.base_url).rstrip("/"), token_for(globex, "mallory")) as mcp,
    ):
        # REST runs, by absolute path and by a relative one that climbs out.
        for named in (theirs, sideways):
            run = await http.post(
                "/v1/runs", json={"agent": "review", "input": "x", "workspace": named}
            )
            assert run.status_code == 422, run.text
            assert NOT_FOUND in run.text
        session = await http.post("/v1/sessions", json={"agent": "review", "workspace": theirs})
        assert session.status_code == 422 and NOT_FOUND in session.text, session.text
        schedule = await http.post(
            "/v1/schedules",
            json={"agent": "review", "input": "x", "workspace": theirs, "interval_s": 3600},
        )
        assert schedule.status_code == 422 and NOT_FOUND in schedule.text, schedule.text

        # MCP: start_run, and the read tools that would show the code directly.
        assert NOT_FOUND in await refused(
            mcp, "start_run", agent="review", input="x", workspace=theirs
        )
        assert NOT_FOUND in await refused(mcp, "read_file", workspace=theirs, path="README.md")

        # A2A: the workspace travels in the message's metadata.
        sent = await http.post(
            "/a2a",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": text_message("x", metadata={"workspace": theirs}),
            },
            headers={"A2A-Version": "1.0"},
        )
        assert NOT_FOUND in sent.json()["error"]["message"], sent.text

        # LangGraph: a thread's metadata, and a run's configurable.
        lg = langgraph(http, "mallory", tenant=globex)
        with pytest.raises(UnprocessableEntityError, match=NOT_FOUND):
            await lg.threads.create(metadata={"graph_id": "review", "workspace": theirs})
        with pytest.raises(UnprocessableEntityError, match=NOT_FOUND):
            await lg.runs.create(
                None, "review", input=ask, config={"configurable": {"workspace": theirs}}
            )

        # AG-UI: forwardedProps.
        agui = await http.post(
            "/ag-ui/review",
            json={
                "threadId": f"thread-{uuid.uuid4().hex[:8]}",
                "runId": f"run-{uuid.uuid4().hex[:8]}",
                "messages": [{"id": "m1", "role": "user", "content": "x"}],
                "forwardedProps": {"workspace": theirs},
            },
        )
        assert agui.status_code == 422 and NOT_FOUND in agui.text, agui.text

        # Nothing of globex's started, and its own workspace works as before — by its
        # absolute path, by a relative one, and by default (A2A: its root).
        assert (await http.get("/v1/runs")).json()["runs"] == []
        own = await http.post(
            "/v1/runs", json={"agent": "review", "input": "Say done.", "workspace": "proj"}
        )
        assert own.status_code == 201, own.text
        assert own.json()["workspace"] == str(projects[globex].resolve())
        assert (await finished(http, own.json()["id"], mallory))["status"] == "completed"

        # A path that does not exist gets the same sentence as acme's, which does.
        ghost = await http.post(
            "/v1/runs",
            json={"agent": "review", "input": "x", "workspace": str(root / acme / "nothing")},
        )
        assert ghost.status_code == 422 and NOT_FOUND in ghost.text

    refusals = await denials(store, globex)
    # One audit entry per door (two REST runs, session, schedule, MCP start and read,
    # A2A, two LangGraph, AG-UI, and the missing directory in acme's).
    assert len(refusals) == 11, refusals
    assert await denials(store, acme) == []


async def test_the_dev_default_keeps_one_root_for_every_tenant(
    temporal_client: TemporalClient,
    store: Store,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    root = tmp_path / "workspaces"
    projects = tenant_roots(root, "default", "other")
    settings = settings_for(scripted(DONE), root, api_port=free_port())
    assert settings.workspace_tenancy == "shared"
    async with keel_api(temporal_client, store, settings, worker=False) as http:
        for named in (str(projects["other"]), "other/proj", "."):
            run = await http.post(
                "/v1/runs",
                json={"agent": "review", "input": "x", "workspace": named},
                headers=auth_headers("default", "alice"),
            )
            assert run.status_code == 201, run.text
        outside = await http.post(
            "/v1/runs",
            json={"agent": "review", "input": "x", "workspace": str(tmp_path)},
            headers=auth_headers("default", "alice"),
        )
        assert outside.status_code == 422 and "outside the allowed root" in outside.text


async def test_a_schedule_made_before_the_boundary_runs_no_tool_in_another_tenants_directory(
    temporal_client: TemporalClient,
    store: Store,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    acme, globex = f"acme-{uuid.uuid4().hex[:6]}", f"globex-{uuid.uuid4().hex[:6]}"
    root = tmp_path / "workspaces"
    projects = tenant_roots(root, acme, globex)
    reads = Script(
        turns=[
            Turn(tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": "README.md"})]),
            Turn(content="done"),
        ]
    )
    llm = scripted(reads)
    mallory = auth_headers(globex, "mallory")
    shared = settings_for(llm, root, api_port=free_port())
    # Made while every tenant shared the root: globex's schedule names acme's directory.
    async with keel_api(temporal_client, store, shared, headers=mallory, worker=False) as http:
        made = await http.post(
            "/v1/schedules",
            json={
                "agent": "review",
                "input": "Read it.",
                "workspace": str(projects[acme]),
                "cron_expressions": ["0 3 1 1 *"],
            },
        )
        assert made.status_code == 201, made.text
        schedule_id = made.json()["id"]
    # The operator turns the boundary on; the schedule fires on the same task queue.
    bounded = shared.model_copy(update={"workspace_tenancy": "per-tenant", "api_port": free_port()})
    async with keel_api(temporal_client, store, bounded, headers=mallory) as http:
        fired = await http.post(f"/v1/schedules/{schedule_id}/trigger")
        assert fired.status_code == 202, fired.text
        run = await finished(http, fired.json()["run_id"], mallory)
        assert run["status"] == "completed"
        # The model was told, and never saw acme's file.
        told = json.dumps(llm.last_request(1))
        assert "not one of this tenant's workspaces" in told
        assert "secret plans" not in told
        await http.delete(f"/v1/schedules/{schedule_id}")
    assert len(await denials(store, globex)) == 1
