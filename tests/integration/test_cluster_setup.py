"""The cluster checked at start (issue 31, #3): `/readyz` and the worker see a namespace
without Keel's search attributes (or with one mistyped, or no namespace at all), and
`keel setup temporal` makes it ready, idempotently."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.cluster_check import ClusterSetupError, check_cluster
from keel.worker.dev_stack import TemporalDevServer, free_port
from keel.worker.runtime import running_worker
from keel.worker.temporal_client import connect
from tests.integration.keel_http import ALICE, MakeSettings, eventually
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_temporal_refusals import bare_namespace, run_body


@pytest.mark.slow  # starts `keel` processes and a second Temporal namespace
async def test_readiness_names_what_the_namespace_lacks_until_keel_setup_temporal_adds_it(
    temporal_server: TemporalDevServer,
    temporal_client: Client,
    store: Store,
    workspace: Path,
    settings_for: MakeSettings,
) -> None:
    namespace = await bare_namespace(temporal_client)
    env = clean_env(TEMPORAL_ADDRESS=temporal_server.address, TEMPORAL_NAMESPACE=namespace)
    settings = settings_for(
        "http://127.0.0.1:9/v1", workspace, api_port=free_port(), temporal_namespace=namespace
    )
    async with serve_api(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        unready = await http.get("/readyz")
        assert unready.status_code == 503
        body = unready.json()
        assert body["temporal"] == "misconfigured" and body["database"] == "ok"
        assert "KeelAgent" in body["problems"][0] and "keel setup temporal" in body["problems"][0]

        # The worker refuses to start rather than fail every run it takes.
        with pytest.raises(ClusterSetupError, match="keel setup temporal"):
            async with running_worker(settings):
                pass

        code, out = await keel("setup", "temporal", "--check", env=env)
        assert code == 1 and "lacks Keel's search attributes" in out, out

        code, out = await keel("setup", "temporal", env=env)
        assert code == 0, out
        assert "Registered search attributes KeelAgent, KeelTenant" in out
        code, out = await keel("setup", "temporal", env=env)  # again: nothing more to do
        assert code == 0 and "is ready for Keel" in out, out
        code, out = await keel("setup", "temporal", "--check", env=env)
        assert code == 0, out

        async def ready() -> bool:
            return (await http.get("/readyz")).status_code == 200

        await eventually(ready, "the API to be ready", within=30)
        started = await http.post("/v1/runs", json=run_body(workspace), headers=ALICE)
        assert started.status_code == 201, started.text


@pytest.mark.slow  # starts `keel` processes and a second Temporal namespace
async def test_keel_setup_temporal_creates_a_missing_namespace(
    temporal_server: TemporalDevServer,
) -> None:
    namespace = f"fresh-{uuid.uuid4().hex[:8]}"
    env = clean_env(TEMPORAL_ADDRESS=temporal_server.address, TEMPORAL_NAMESPACE=namespace)
    code, out = await keel("setup", "temporal", "--check", env=env)
    assert code == 1 and f"no namespace '{namespace}'" in out, out
    # Two replicas' init containers at once: both succeed, one of them did the work.
    (code, out), (other_code, other) = await asyncio.gather(
        keel("setup", "temporal", "--retention-days", "3", env=env),
        keel("setup", "temporal", "--retention-days", "3", env=env),
    )
    assert code == 0 and other_code == 0, (out, other)
    assert f"Created namespace '{namespace}'" in out + other
    report = await check_cluster(await connect(temporal_server.address, namespace))
    assert report.ok, report.sentence()


async def test_an_attribute_of_the_wrong_type_is_named_and_not_papered_over(
    temporal_server: TemporalDevServer, temporal_client: Client
) -> None:
    namespace = await bare_namespace(temporal_client)
    await temporal_client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=namespace,
            search_attributes={"KeelAgent": IndexedValueType.INDEXED_VALUE_TYPE_INT},
        )
    )
    env = clean_env(TEMPORAL_ADDRESS=temporal_server.address, TEMPORAL_NAMESPACE=namespace)
    code, out = await keel("setup", "temporal", env=env)
    assert code == 1, out
    said = " ".join(out.split())  # the console folds a long line at its width
    assert "KeelAgent" in said and "is Int, but Keel needs Keyword" in said
