"""The Temporal UI reads like the run: search attributes, a memo, activity summaries."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from keel.workflows.activity_call import SUMMARY_CHARS
from tests.conftest import auth_headers
from tests.integration.conftest import LaunchKeel


async def listed(client: Client, query: str, count: int) -> set[str]:
    """Run ids the visibility query finds, once it finds `count` (visibility lags a little)."""
    found: set[str] = set()
    for _ in range(200):
        found = {w.id async for w in client.list_workflows(query)}
        if len(found) >= count:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"{query!r} found {found}, wanted {count}")


async def test_runs_list_by_agent_and_tenant_and_name_their_steps(
    temporal_client: Client, workspace: Path, keel_app: LaunchKeel
) -> None:
    script = Script(
        turns=[
            # `git status*` is allowed for the build agent: a command, a regular activity.
            Turn(
                tool_calls=[ScriptedToolCall(name="bash", arguments={"command": ["git", "status"]})]
            ),
            Turn(content="Done."),
        ]
    )
    acme, globex = f"acme-{uuid.uuid4().hex[:6]}", f"globex-{uuid.uuid4().hex[:6]}"
    started: dict[tuple[str, str], str] = {}
    async with keel_app(script) as http:
        for tenant, agent in [(acme, "review"), (acme, "build"), (globex, "review")]:
            response = await http.post(
                "/v1/runs",
                headers=auth_headers(tenant, "carol"),
                json={"agent": agent, "input": "Look.", "workspace": str(workspace)},
            )
            assert response.status_code == 201, response.text
            started[tenant, agent] = response.json()["id"]
        for run_id in started.values():
            await temporal_client.get_workflow_handle(run_id).result()

    by_tenant = await listed(temporal_client, f'KeelTenant = "{acme}"', 2)
    assert by_tenant == {started[acme, "review"], started[acme, "build"]}
    tenants = f'KeelTenant IN ("{acme}", "{globex}")'
    by_agent = await listed(temporal_client, f'KeelAgent = "review" AND {tenants}', 2)
    assert by_agent == {started[acme, "review"], started[globex, "review"]}
    assert await listed(temporal_client, f'KeelTrigger = "api" AND KeelTenant = "{globex}"', 1) == {
        started[globex, "review"]
    }

    handle = temporal_client.get_workflow_handle(started[acme, "build"])
    description = await handle.describe()
    assert await description.memo_value("requester") == "user:carol"

    summaries: list[str] = []
    converter = temporal_client.data_converter.payload_converter
    async for event in handle.fetch_history_events():
        if event.user_metadata.HasField("summary"):
            summaries.append(converter.from_payload(event.user_metadata.summary, str))
        assert event.event_type != EventType.EVENT_TYPE_UNSPECIFIED
    # Regular activities are named; fast local steps are not (history bytes), the
    # run's outcome is.
    # The first model call is regular unless the API saw the model fast in earlier runs.
    assert summaries[-2:] == ["bash git status", "finish completed"]
    assert summaries[:-2] in ([], ["model call 1 · scripted"])
    assert all(len(s) <= SUMMARY_CHARS for s in summaries)
