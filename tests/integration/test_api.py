"""The HTTP API over real HTTP, with its real lifespan, worker, Temporal and Postgres."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from keel.worker.agent_catalog import AgentCatalog
from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.integration.keel_http import LaunchKeel, StartLLM, run_reaches


async def test_post_a_run_follow_its_events_and_read_the_report(
    temporal_client: Client, workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"})
                    ]
                ),
                Turn(content="## Files reviewed\n{files_read}"),
            ]
        )
    )
    async with keel_app(llm) as http:
        assert (await http.get("/health")).json()["status"] == "ok"
        agents = (await http.get("/v1/agents")).json()
        assert {"review", "investigate", "explore"} <= {a["name"] for a in agents}

        created = await http.post(
            "/v1/runs",
            json={
                "agent": "review",
                "input": "Review it.",
                "workspace": str(workspace),
                "run_id": "api-run-1",
            },
        )
        assert created.status_code == 201, created.text
        assert created.json()["id"] == "api-run-1"
        # The same request again is idempotent: same run, no second workflow.
        again = await http.post(
            "/v1/runs",
            json={
                "agent": "review",
                "input": "Review it.",
                "workspace": str(workspace),
                "run_id": "api-run-1",
            },
        )
        assert again.status_code == 201 and again.json()["id"] == "api-run-1"

        run = await run_reaches(http, "api-run-1", "completed", "failed")
        assert run["status"] == "completed"
        assert "- pkg/core.py" in str(run["report"])
        usage = run["usage"]
        assert isinstance(usage, dict) and usage["total_tokens"] == 240

        page = (await http.get("/v1/runs/api-run-1/events", params={"after": 2})).json()
        assert page["events"][0]["seq"] == 3
        assert page["events"][-1]["type"] == "done"

        listed = (await http.get("/v1/runs", params={"limit": 200})).json()
        assert "api-run-1" in [r["id"] for r in listed["runs"]]
        assert llm.total_requests == 2

    # The model got the agent's prompt and the input; the workflow history has neither,
    # only the key they are stored under.
    prompt = AgentCatalog.load().get("review")
    assert prompt is not None
    sent = llm.last_request(0)["messages"]
    assert sent[0] == {"role": "system", "content": prompt.system_prompt}
    assert sent[1] == {"role": "user", "content": "Review it."}
    history = await temporal_client.get_workflow_handle("api-run-1").fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    recorded = started.input.payloads[0].data
    assert b'"texts_key":"' in recorded
    assert b"Review it." not in recorded and prompt.system_prompt[:40].encode() not in recorded


async def test_bad_requests_get_clear_errors_and_start_nothing(
    workspace: Path, tmp_path: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(Script(turns=[Turn(content="unused")]))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    async with keel_app(llm, worker=False) as http:
        cases = [
            ({"agent": "nope", "input": "x", "workspace": str(workspace)}, "Unknown agent"),
            ({"agent": "review", "input": "x", "workspace": str(outside)}, "outside the allowed"),
            ({"agent": "review", "input": "x", "workspace": "missing"}, "not an existing"),
            ({"agent": "review", "input": "", "workspace": str(workspace)}, "The task is empty"),
            ({"agent": "review", "input": " ", "workspace": str(workspace)}, "or only spaces"),
            ({"agent": "review", "input": "x", "workspace": ".", "extra": 1}, "Not a field"),
            (
                {"agent": "review", "input": "x", "workspace": ".", "approver": "bob"},
                "Must be `user:` and a user id without spaces, such as user:alice, not 'bob'.",
            ),
            (
                {"agent": "review", "input": "x", "workspace": ".", "approval_expires_after_s": 0},
                "Must be at least 1, not 0.",
            ),
            ({"agent": "review", "input": "x"}, "Required; give it a value."),
        ]
        for body, message in cases:
            response = await http.post("/v1/runs", json=body)
            assert response.status_code == 422, body
            assert message in response.text, response.text
            assert "should" not in response.text.replace("agent should do", ""), response.text
        for params, message in [
            ({"limit": "many"}, "Must be a whole number, not 'many'."),
            ({"limit": "0"}, "Must be at least 1, not 0."),
        ]:
            listed = await http.get("/v1/runs", params=params)
            assert listed.status_code == 422 and listed.json()["detail"][0]["msg"] == message, (
                listed.text
            )
        missing = await http.get("/v1/runs/does-not-exist")
        assert missing.status_code == 404
        bad_cursor = await http.get("/v1/runs", params={"cursor": "!!"})
        assert bad_cursor.status_code == 422
    assert llm.total_requests == 0
