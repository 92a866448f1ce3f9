"""What Temporal answers, told truthfully (issue 31, #2): a namespace without Keel's
search attributes and a namespace that does not exist are setup faults an operator must
fix — a 500-class answer that names the cause and `keel setup temporal`, logged once —
not "Temporal did not answer"; a Temporal that does not answer is still a 503."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from keel.activities.store.run_store import Store
from keel.api.core.errors import Misconfigured, Unavailable
from keel.api.core.temporal_errors import from_temporal
from keel.worker.dev_stack import free_port
from tests.conftest import token_for
from tests.integration.keel_http import ALICE, MakeSettings, keel_api
from tests.integration.test_mcp import mcp_client, refused


async def bare_namespace(client: Client) -> str:
    """A namespace of the test dev server's with none of Keel's search attributes."""
    name = f"bare-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    return name


def run_body(workspace: Path) -> dict[str, object]:
    return {
        "agent": "build",
        "input": "Say hello.",
        "workspace": str(workspace),
        "run_id": f"run-{uuid.uuid4().hex[:8]}",
    }


async def test_a_namespace_without_keels_search_attributes_is_a_setup_error_not_a_503(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    settings_for: MakeSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    namespace = await bare_namespace(temporal_client)
    settings = settings_for(
        "http://127.0.0.1:9/v1", workspace, api_port=free_port(), temporal_namespace=namespace
    )
    caplog.set_level(logging.ERROR, logger="keel.api.temporal")
    async with keel_api(temporal_client, store, settings, headers=ALICE, worker=False) as http:
        body = run_body(workspace)
        for _ in range(2):
            refused = await http.post("/v1/runs", json=body)
            assert refused.status_code == 500, refused.text
            assert "Retry-After" not in refused.headers
            detail = refused.json()["detail"]
            assert f"namespace '{namespace}'" in detail
            assert "search attributes" in detail
            assert "keel setup temporal" in detail
            assert "did not answer" not in detail
        # Nothing was left behind: the run is not found, not a queued ghost.
        assert (await http.get(f"/v1/runs/{body['run_id']}")).status_code == 404

        # Schedules and coordinations carry the same attributes: the same truth.
        schedule = await http.post(
            "/v1/schedules",
            json={
                "agent": "build",
                "input": "x",
                "workspace": str(workspace),
                "interval_s": 3600,
            },
        )
        assert schedule.status_code == 500, schedule.text
        assert "keel setup temporal" in schedule.json()["detail"]
        listed = await http.get("/v1/coordinations")
        assert listed.status_code == 500, listed.text
        assert "search attributes" in listed.json()["detail"]

    # Logged with Temporal's own detail, once per cause however often it is met.
    logged = [r for r in caplog.records if r.name == "keel.api.temporal"]
    starts = [r for r in logged if "start the run" in r.getMessage()]
    assert len(starts) == 1
    assert "has no mapping defined for search attribute Keel" in starts[0].getMessage()
    assert "INVALID_ARGUMENT" in starts[0].getMessage()


async def test_a_namespace_that_does_not_exist_is_named(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    settings_for: MakeSettings,
) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    settings = settings_for(
        "http://127.0.0.1:9/v1", workspace, api_port=free_port(), temporal_namespace=missing
    )
    async with keel_api(temporal_client, store, settings, headers=ALICE, worker=False) as http:
        body = run_body(workspace)
        refused = await http.post("/v1/runs", json=body)
        assert refused.status_code == 500, refused.text
        detail = refused.json()["detail"]
        assert f"no namespace '{missing}'" in detail
        assert "TEMPORAL_NAMESPACE" in detail
        assert (await http.get(f"/v1/runs/{body['run_id']}")).status_code == 404
        schedules = await http.get("/v1/schedules")
        assert schedules.status_code == 500, schedules.text
        assert f"no namespace '{missing}'" in schedules.json()["detail"]


async def test_mcp_renders_the_same_setup_fault(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    settings_for: MakeSettings,
) -> None:
    namespace = await bare_namespace(temporal_client)
    settings = settings_for(
        "http://127.0.0.1:9/v1", workspace, api_port=free_port(), temporal_namespace=namespace
    )
    async with (
        keel_api(temporal_client, store, settings, headers=ALICE, worker=False) as http,
        mcp_client(str(http.base_url).rstrip("/"), token_for("default", "alice")) as mcp,
    ):
        told = await refused(mcp, "start_run", agent="build", input="x", workspace=str(workspace))
        assert "search attributes" in told and "keel setup temporal" in told, told
        assert "did not answer" not in told


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (RPCStatusCode.UNAVAILABLE, Unavailable),
        (RPCStatusCode.DEADLINE_EXCEEDED, Unavailable),
        (RPCStatusCode.RESOURCE_EXHAUSTED, Unavailable),
        (RPCStatusCode.PERMISSION_DENIED, Misconfigured),
        (RPCStatusCode.UNAUTHENTICATED, Misconfigured),
        (RPCStatusCode.INTERNAL, Misconfigured),
    ],
)
def test_each_status_means_what_it_says(status: RPCStatusCode, kind: type[Exception]) -> None:
    refusal = from_temporal(
        RPCError("request denied for this identity", status, b""),
        doing="start the run",
        namespace="prod",
    )
    assert isinstance(refusal, kind)
    if isinstance(refusal, Unavailable):
        assert refusal.retry_after_s
    else:
        assert "namespace 'prod'" in refusal.message or status == RPCStatusCode.INTERNAL
        assert "request denied for this identity" in refusal.message
