"""Rolling out a new worker version (issue 31, safe deploy): with KEEL_WORKER_BUILD_ID
workers join a Temporal Worker Deployment; runs started on version a finish while b
becomes current — moved to b (`auto-upgrade`, the default, for workflow changes behind
`workflow.patched`) or kept on a until they end (`pinned`) — and new runs go to b."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest
from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.service import RPCError

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, Turn
from tests.conftest import in_process_worker
from tests.integration.keel_http import ALICE, MakeSettings, StartLLM, finished, pending
from tests.integration.test_approvals import decide, start, write

WRITES = Script(turns=[Turn(tool_calls=[write("n.txt", "x")]), Turn(content="Wrote it.")])


async def make_current(client: Client, deployment: str, build_id: str) -> None:
    """What `temporal worker deployment set-current-version` does, once the version's
    workers have polled (the server refuses a version it has not seen yet)."""
    for _ in range(100):
        try:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace, deployment_name=deployment, build_id=build_id
                )
            )
            return
        except RPCError:
            await asyncio.sleep(0.2)
    raise AssertionError(f"version {build_id} of {deployment} never became current")


async def build_of(client: Client, run_id: str) -> str:
    """The version the run's last workflow task completed on.

    The server records it when a task completes, not when the task's commands take
    effect: a run can be seen waiting (its local activities stored the interaction)
    before the task that got it there is done, and until then the build id is empty.
    """
    handle = client.get_workflow_handle(run_id)
    for _ in range(150):
        described = await handle.describe()
        info = described.raw_description.workflow_execution_info.versioning_info
        if info.deployment_version.build_id:
            return info.deployment_version.build_id
        await asyncio.sleep(0.2)
    raise AssertionError(f"{run_id} has no worker version after 30 s")


@pytest.mark.parametrize("behavior", ["auto-upgrade", "pinned"])
async def test_runs_on_version_a_finish_while_b_rolls_out(
    behavior: str,
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    deployment = f"keel-{uuid.uuid4().hex[:8]}"
    a = settings_for(
        scripted(WRITES),
        workspace,
        api_port=free_port(),
        worker_build_id="a",
        worker_deployment=deployment,
        worker_versioning=behavior,
    )
    b = a.model_copy(update={"worker_build_id": "b"})
    # Its own stack: two workers of different build ids, one after the other, under one API.
    async with (
        serve_api(a) as url,
        httpx.AsyncClient(base_url=url, headers=ALICE, timeout=60) as http,
        AsyncExitStack() as old_version,
    ):
        await old_version.enter_async_context(in_process_worker(temporal_client, store, a))
        await make_current(temporal_client, deployment, "a")
        first = await start(http, workspace)
        [asked] = await pending(http, first)
        assert await build_of(temporal_client, first) == "a"

        async with in_process_worker(temporal_client, store, b):
            await make_current(temporal_client, deployment, "b")
            # New runs go to b at once.
            second = await start(http, workspace)
            [asked_second] = await pending(http, second)
            assert await build_of(temporal_client, second) == "b"
            if behavior == "auto-upgrade":
                await old_version.aclose()  # a is gone: b must take the first run on
            assert (await decide(http, first, asked)).status_code in (200, 202)
            assert (await finished(http, first))["status"] == "completed"
            assert await build_of(temporal_client, first) == (
                "b" if behavior == "auto-upgrade" else "a"
            )
            assert (await decide(http, second, asked_second)).status_code in (200, 202)
            assert (await finished(http, second))["status"] == "completed"
    assert (workspace / "n.txt").read_text() == "x"
