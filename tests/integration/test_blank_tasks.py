"""A task that is empty or only spaces is refused with one sentence on every surface, and
starts nothing: REST, sessions, schedules, MCP, A2A, LangGraph, AG-UI and the CLI.

Before, only spaces started a full review, and an empty task answered pydantic's
"String should have at least 1 character"."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from keel.api.core.plain_errors import BLANK_TASK
from keel.worker.scripted.llm import Script, Turn
from tests.conftest import JWT_SECRET, auth_headers, token_for
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import base_url
from tests.integration.test_cli import clean_env, keel
from tests.integration.test_langgraph import client_for
from tests.integration.test_mcp import mcp_client, refused

BLANKS = ["", "   ", " \n\t "]


@pytest.mark.parametrize("blank", BLANKS, ids=["empty", "spaces", "whitespace"])
async def test_a_blank_task_is_refused_with_a_sentence_everywhere_and_starts_nothing(
    workspace: Path, tmp_path: Path, keel_app: LaunchKeel, blank: str
) -> None:
    tenant = f"blank-{uuid.uuid4().hex[:8]}"
    headers = auth_headers(tenant, "alice")
    script = Script(turns=[Turn(content="A run that should never start.")])
    async with keel_app(script, headers=headers) as http:
        url = base_url(http)

        async def said(response: httpx.Response) -> str:
            assert response.status_code == 422, response.text
            return response.text

        # REST: the body names the field; its message is the sentence.
        rest = await http.post(
            "/v1/runs", json={"agent": "review", "input": blank, "workspace": str(workspace)}
        )
        [problem] = (await said(rest)) and rest.json()["detail"]
        assert problem["loc"] == ["body", "input"] and problem["msg"] == BLANK_TASK, problem

        session = await http.post(
            "/v1/sessions", json={"agent": "review", "workspace": str(workspace)}
        )
        assert session.status_code == 201, session.text
        message = await http.post(
            f"/v1/sessions/{session.json()['id']}/messages", json={"input": blank}
        )
        assert BLANK_TASK in await said(message)

        schedule = await http.post(
            "/v1/schedules",
            json={
                "agent": "review",
                "input": blank,
                "workspace": str(workspace),
                "interval_s": 3600,
                "paused": True,
            },
        )
        assert BLANK_TASK in await said(schedule)

        async with mcp_client(url, token_for(tenant, "alice")) as client:
            text = await refused(
                client, "start_run", agent="review", input=blank, workspace=str(workspace)
            )
            assert BLANK_TASK.rstrip(".") in text and "String should" not in text, text

        a2a = await http.post(
            "/a2a/",
            headers={"A2A-Version": "1.0"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": blank}]}
                },
            },
        )
        error = a2a.json()["error"]
        assert error["message"] == "The message has no text part to act on.", a2a.text

        lg = client_for(url, tenant, "alice")
        thread = await lg.threads.create(metadata={"graph_id": "review"})
        with pytest.raises(UnprocessableEntityError) as lg_refused:
            await lg.runs.create(
                thread["thread_id"],
                "review",
                input={"messages": [{"role": "user", "content": blank}]},
            )
        assert "must end with a user message with text" in str(lg_refused.value.body), (
            lg_refused.value.body
        )

        agui = await http.post(
            "/ag-ui/review",
            json={
                "threadId": f"t-{uuid.uuid4().hex[:6]}",
                "runId": "r-1",
                "messages": [{"id": "u1", "role": "user", "content": blank}],
            },
        )
        assert "user message with text" in await said(agui)

        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        code, out = await keel("run", "review", blank, "--workspace", str(workspace), env=env)
        assert code == 1 and f"error: PROMPT: {BLANK_TASK}" in " ".join(out.split()), out

        # Nothing started anywhere, and nothing was scheduled.
        runs = (await http.get("/v1/runs", params={"children": "include"})).json()["runs"]
        assert runs == [], runs
        assert (await http.get("/v1/schedules")).json()["schedules"] == []


async def test_the_cli_shows_the_apis_refusal_as_its_sentence(
    workspace: Path, tmp_path: Path, keel_app: LaunchKeel
) -> None:
    async with keel_app(Script(turns=[Turn(content="unused")]), worker=False) as http:
        env = clean_env(
            KEEL_API_URL=base_url(http),
            KEEL_DATA_DIR=str(tmp_path / "cli"),
            KEEL_JWT_SECRET=JWT_SECRET,
        )
        code, out = await keel("run", "nope", "Look.", "--workspace", str(workspace), env=env)
        flat = " ".join(out.split())
        assert code == 1 and "error: Unknown agent 'nope'. Known agents:" in flat, out
        assert "422" not in out and "AGENT:" not in out, out
