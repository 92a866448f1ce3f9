"""Liveness and readiness: readiness follows Temporal and Postgres, liveness only the process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import TemporalDevServer, free_port

MakeSettings = Callable[..., Settings]


async def test_readiness_follows_temporal_and_liveness_does_not(
    tmp_path: Path, workspace: Path, settings_for: MakeSettings
) -> None:
    # A Temporal server of the test's own, so it can be stopped under the API.
    temporal = TemporalDevServer(
        db_file=tmp_path / "t.sqlite", port=free_port(), log_file=tmp_path / "t.log"
    )
    await temporal.start()
    try:
        settings = settings_for(
            "http://127.0.0.1:9/v1",
            workspace,
            api_port=free_port(),
            temporal_address=temporal.address,
        )
        async with serve_api(settings) as url, httpx.AsyncClient(base_url=url, timeout=10) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 200
            assert ready.json() == {"status": "ready", "temporal": "ok", "database": "ok"}
            assert (await http.get("/livez")).json() == {"status": "ok"}

            await temporal.stop()
            unready = await http.get("/readyz")
            assert unready.status_code == 503
            assert unready.json() == {
                "status": "unready",
                "temporal": "unreachable",
                "database": "ok",
            }
            assert (await http.get("/livez")).status_code == 200
    finally:
        await temporal.stop()
