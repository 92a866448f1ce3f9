"""The REST reads the console added, over real HTTP: each scoped to the caller's tenant."""

from __future__ import annotations

import itertools
import uuid
from datetime import datetime
from pathlib import Path

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.conftest import auth_headers
from tests.integration.keel_http import ALICE, MALLORY, LaunchKeel, finished


async def test_tool_outputs_usage_filters_and_previews(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    (workspace / "big.txt").write_text("".join(f"line {i}\n" for i in range(3000)))
    script = Script(
        turns=[
            Turn(
                tool_calls=[ScriptedToolCall(name="read_file", arguments={"path": "big.txt"})],
                prompt_tokens=111,
                completion_tokens=7,
            ),
            Turn(content="Read it.", prompt_tokens=222, completion_tokens=9),
        ]
    )
    async with keel_app(script, headers={}) as http:
        created = await http.post(
            "/v1/runs",
            headers=ALICE,
            json={"agent": "investigate", "input": "Read big.txt", "workspace": str(workspace)},
        )
        run_id = created.json()["id"]
        await finished(http, run_id)
        events = (await http.get(f"/v1/runs/{run_id}/events", headers=ALICE)).json()["events"]
        result = next(e["data"] for e in events if e["type"] == "tool_result")
        path = f"/v1/runs/{run_id}/tool-outputs/{result['step']}/{result['call_id']}"

        full = await http.get(path, headers=ALICE)
        assert full.status_code == 200
        body = full.json()
        assert body["name"] == "read_file" and not body["is_error"]
        assert len(body["content"]) > len(result["preview"]) and "line 2999" in body["content"]
        assert (await http.get(path, headers=MALLORY)).status_code == 404
        missing = f"/v1/runs/{run_id}/tool-outputs/{result['step']}/nope"
        assert (await http.get(missing, headers=ALICE)).status_code == 404

        usage = (await http.get("/v1/usage?days=1", headers=ALICE)).json()
        mine = [r for r in usage if r["agent"] == "investigate"]
        assert sum(r["prompt_tokens"] for r in mine) >= 333
        # A tenant of its own: other tests in this process's database use "other-tenant".
        stranger = auth_headers(f"tenant-{uuid.uuid4().hex[:8]}", "mallory")
        assert (await http.get("/v1/usage", headers=stranger)).json() == []

        api_runs = (await http.get("/v1/runs?trigger=api&limit=200", headers=ALICE)).json()
        assert run_id in [r["id"] for r in api_runs["runs"]]
        cli_runs = (await http.get("/v1/runs?trigger=cli&limit=200", headers=ALICE)).json()
        assert run_id not in [r["id"] for r in cli_runs["runs"]]
        by_schedule = (await http.get("/v1/runs?schedule=none-such", headers=ALICE)).json()
        assert by_schedule["runs"] == []
        assert (await http.get("/v1/interactions", headers=stranger)).json() == []

        spec = {"agent": "investigate", "input": "x", "workspace": "."}
        hourly = await http.post(
            "/v1/schedule-preview?count=3", headers=ALICE, json={**spec, "interval_s": 3600}
        )
        times = [datetime.fromisoformat(t) for t in hourly.json()["next_fire_times"]]
        assert len(times) == 3 and all(
            (b - a).total_seconds() == 3600 for a, b in itertools.pairwise(times)
        )
        both = await http.post(
            "/v1/schedule-preview",
            headers=ALICE,
            json={**spec, "interval_s": 60, "cron_expressions": ["* * * * *"]},
        )
        assert both.status_code == 422
        bad = await http.post(
            "/v1/schedule-preview", headers=ALICE, json={**spec, "cron_expressions": ["61 * * * *"]}
        )
        assert bad.status_code == 422
