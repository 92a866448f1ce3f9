"""`keel mcp` as a desktop client starts it: a subprocess on stdio, driven by the `mcp`
SDK's own stdio client, in front of a running Keel (real API, worker, Temporal, Postgres)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import (
    LoggingMessageNotificationParams,
    ResourceUpdatedNotification,
    TextContent,
    TextResourceContents,
)
from temporalio.client import Client as TemporalClient

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Conversation, Script, ScriptedLLMServer, ScriptedToolCall, Turn
from tests.conftest import JWT_SECRET, in_process_worker, token_for
from tests.integration.test_cli import clean_env
from tests.integration.test_mcp import FINISHED, TOOLS, call, mcp_client, refused

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
REPORT = "# Review\n\n## Files reviewed\n{files_read}\n\n## Findings\nnone"


def keel_mcp(api_url: str, data_dir: Path) -> StdioServerParameters:
    """`keel mcp` as a client's configuration starts it, with the local secret."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "keel.api.cli.main", "mcp"],
        env=clean_env(
            KEEL_API_URL=api_url, KEEL_DATA_DIR=str(data_dir), KEEL_JWT_SECRET=JWT_SECRET
        ),
    )


def text_of(result: Any) -> str:
    [content] = result.content
    assert isinstance(content, TextContent)
    return str(content.text)


async def finished(client: Client, run_id: str) -> dict[str, Any]:
    for _ in range(600):
        detail = await call(client, "get_run", run_id=run_id)
        if detail["run"]["status"] in FINISHED:
            return detail
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never finished")


@pytest.mark.slow
async def test_keel_mcp_over_stdio_offers_tools_resources_and_prompts(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"})
                    ]
                ),
                Turn(content=REPORT),
            ]
        )
    )
    settings = settings_for(llm, workspace.parent, api_port=free_port())
    outside = workspace.parent / "secret.txt"
    outside.write_text("not for clients\n")
    run_id = f"stdio-run-{uuid.uuid4().hex[:8]}"
    ws = str(workspace)
    async with (
        in_process_worker(temporal_client, store, settings),
        serve_api(settings) as url,
        Client(stdio_client(keel_mcp(url, tmp_path / "cli")), cache=None) as client,
    ):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        assert tools["read_file"].input_schema["required"] == ["workspace", "path"]
        assert tools["read_file"].annotations and tools["read_file"].annotations.read_only_hint

        # The code tools: the agents' implementations, inside the workspace only.
        read = await client.call_tool("read_file", {"workspace": ws, "path": "pkg/core.py"})
        assert not read.is_error
        assert "pkg/core.py (lines 1-3 of 3)" in text_of(read) and "return a + b" in text_of(read)
        escape = await refused(client, "read_file", workspace=ws, path="../secret.txt")
        assert "outside the workspace" in escape and "not for clients" not in escape
        root_escape = await refused(client, "read_file", workspace="/", path="etc/passwd")
        assert "outside the allowed root" in root_escape
        listed = await client.call_tool("list_files", {"workspace": ws, "pattern": "**/*.py"})
        assert text_of(listed).splitlines() == [
            f"{rel} ({(workspace / rel).stat().st_size} bytes)"
            for rel in ("pkg/__init__.py", "pkg/core.py")
        ]
        found = await client.call_tool("search_code", {"workspace": ws, "pattern": "TODO"})
        assert text_of(found).startswith("pkg/core.py:2:")

        # Prompts: one per agent and code_review, with its arguments.
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        review = prompts["code_review"]
        assert {(a.name, a.required) for a in review.arguments or []} == {
            ("workspace", True),
            ("focus", False),
        }
        got = await client.get_prompt("code_review", {"workspace": ws, "focus": "error handling"})
        task = got.messages[-1].content
        assert isinstance(task, TextContent)
        assert f"workspace=`{ws}`" in task.text and "Focus on: error handling." in task.text

        # Run management through the same door, as the local user.
        await call(
            client, "start_run", agent="review", input="Review it.", workspace=ws, run_id=run_id
        )
        run = (await finished(client, run_id))["run"]
        assert run["status"] == "completed" and run["requester"] == "user:local"

        # Resources: agents, and the caller's runs with their reports.
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {
            "keel://agents/review",
            f"keel://runs/{run_id}",
            f"keel://runs/{run_id}/report",
        } <= uris
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
        assert templates == {
            "keel://agents/{name}",
            "keel://runs/{run_id}",
            "keel://runs/{run_id}/report",
        }
        [report] = (await client.read_resource(f"keel://runs/{run_id}/report")).contents
        assert isinstance(report, TextResourceContents)
        assert report.mime_type == "text/markdown"
        assert report.text == run["report"] and "- pkg/core.py" in report.text
        [shown] = (await client.read_resource(f"keel://runs/{run_id}")).contents
        assert isinstance(shown, TextResourceContents) and f'"id": "{run_id}"' in shown.text
        [agent] = (await client.read_resource("keel://agents/review")).contents
        assert isinstance(agent, TextResourceContents) and '"name": "review"' in agent.text
        with pytest.raises(MCPError, match="No run no-such-run"):
            await client.read_resource("keel://runs/no-such-run/report")

        # Another tenant, over HTTP, neither lists nor reads the local user's run.
        async with mcp_client(url, token_for(f"other-{uuid.uuid4().hex[:6]}", "eve")) as eve:
            theirs = {str(r.uri) for r in (await eve.list_resources()).resources}
            assert not any(run_id in uri for uri in theirs)
            with pytest.raises(MCPError, match=f"No run {run_id}"):
                await eve.read_resource(f"keel://runs/{run_id}/report")


@pytest.mark.slow
async def test_keel_mcp_starts_the_embedded_stack_when_no_keel_answers(
    workspace: Path, tmp_path: Path
) -> None:
    """No Keel at KEEL_API_URL: `keel mcp` starts one of its own (Temporal, Postgres, worker,
    API) for as long as the client keeps it, and signs in with that stack's local secret."""
    env = clean_env(
        KEEL_API_URL=f"http://127.0.0.1:{free_port()}",
        KEEL_DATA_DIR=str(tmp_path / "keel-data"),
        KEEL_WORKSPACE_ROOT=str(workspace),
        KEEL_API_PORT=str(free_port()),
        KEEL_TEMPORAL_PORT=str(free_port()),
        KEEL_TEMPORAL_UI_PORT=str(free_port()),
    )
    env.pop("KEEL_JWT_SECRET", None)
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "keel.api.cli.main", "mcp"], env=env
    )
    async with Client(stdio_client(server), cache=None, read_timeout_seconds=180) as client:
        read = await client.call_tool("read_file", {"workspace": ".", "path": "README.md"})
        assert not read.is_error and "# project" in text_of(read)
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert "keel://agents/review" in uris
    assert (tmp_path / "keel-data" / "temporal.sqlite").exists()
    assert (tmp_path / "keel-data" / "jwt-secret").exists()


class Notified:
    """What a stdio client heard besides answers: progress, log messages, resource updates."""

    def __init__(self) -> None:
        self.progress: list[str | None] = []
        self.logs: list[LoggingMessageNotificationParams] = []
        self.updated: asyncio.Queue[str] = asyncio.Queue()

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append(message)

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def on_message(self, message: object) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.updated.put_nowait(str(message.params.uri))

    async def until_updated(self, uri: str) -> None:
        while await asyncio.wait_for(self.updated.get(), 60) != uri:
            pass


async def approve_pending(client: Client, run_id: str) -> None:
    [ia] = (await call(client, "get_run", run_id=run_id))["pending_interactions"]
    decision = {"interaction_id": ia["id"], "payload_hash": ia["payload_hash"]}
    await call(client, "decide", run_id=run_id, decision="approve", **decision)


@pytest.mark.slow
async def test_keel_mcp_relays_run_updates_progress_and_logs(
    temporal_client: TemporalClient,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    """Over stdio the handshake era gets what stateless HTTP cannot give it
    (`resources/subscribe`, `logging/setLevel`), and 2026-07-28 gets `subscriptions/listen`."""
    change = [
        Turn(
            tool_calls=[
                ScriptedToolCall(name="write_file", arguments={"path": "a.txt", "content": "a"})
            ]
        ),
        Turn(content="Wrote a."),
    ]
    other = [
        Turn(
            tool_calls=[
                ScriptedToolCall(name="write_file", arguments={"path": "b.txt", "content": "b"})
            ]
        ),
        Turn(content="Wrote b."),
    ]
    llm = scripted(
        Script(
            turns=[Turn(content="unused")],
            conversations=[
                Conversation(match="Write a.", turns=change),
                Conversation(match="Write b.", turns=other),
            ],
        )
    )
    settings = settings_for(llm, workspace.parent, api_port=free_port())
    ws = str(workspace)
    legacy_heard, modern_heard = Notified(), Notified()
    async with (
        in_process_worker(temporal_client, store, settings),
        serve_api(settings) as url,
        Client(
            stdio_client(keel_mcp(url, tmp_path / "cli")),
            mode="legacy",
            cache=None,
            logging_callback=legacy_heard.on_log,
            message_handler=legacy_heard.on_message,
        ) as legacy,
        Client(
            stdio_client(keel_mcp(url, tmp_path / "cli")),
            cache=None,
            log_level="info",
            logging_callback=modern_heard.on_log,
        ) as modern,
    ):
        caps = legacy.server_capabilities
        assert caps.resources is not None and caps.resources.subscribe
        assert caps.logging is not None
        with pytest.warns(MCPDeprecationWarning):
            await legacy.set_logging_level("info")

        # The handshake era: wait with progress and logs, then subscribe and hear the end.
        waited = await legacy.call_tool(
            "start_run",
            {"agent": "build", "input": "Write a.", "workspace": ws, "wait": 60},
            progress_callback=legacy_heard.on_progress,
        )
        started = waited.structured_content or {}
        run_id = started["run_id"]
        assert started["pending_interactions"], started
        assert "waits for you" in (legacy_heard.progress[-1] or "")
        # The log notice of that change may be read off the pipe just after the answer.
        for _ in range(100):
            if legacy_heard.logs and legacy_heard.logs[-1].level == "warning":
                break
            await asyncio.sleep(0.05)
        assert [log.level for log in legacy_heard.logs][-1] == "warning"
        with pytest.warns(MCPDeprecationWarning), pytest.raises(MCPError, match="No run nope"):
            await legacy.subscribe_resource("keel://runs/nope")
        with pytest.warns(MCPDeprecationWarning):
            await legacy.subscribe_resource(f"keel://runs/{run_id}/report")
        await approve_pending(legacy, run_id)
        await legacy_heard.until_updated(f"keel://runs/{run_id}/report")
        assert (await finished(legacy, run_id))["run"]["report"] == "Wrote a."

        # 2026-07-28: logs per request, and a listen stream relayed from /mcp.
        assert modern.protocol_version == "2026-07-28"
        waited = await modern.call_tool(
            "start_run",
            {"agent": "build", "input": "Write b.", "workspace": ws, "wait": 60},
            progress_callback=modern_heard.on_progress,
        )
        second = (waited.structured_content or {})["run_id"]
        # A log notice may be read off the pipe just after the tool's answer.
        for _ in range(100):
            if modern_heard.logs:
                break
            await asyncio.sleep(0.05)
        assert modern_heard.progress and modern_heard.logs
        assert modern_heard.logs[-1].data["run_id"] == second
        report_uri = f"keel://runs/{second}/report"
        async with modern.listen(resource_subscriptions=[report_uri]) as updates:
            assert updates.honored.resource_subscriptions == [report_uri]
            await approve_pending(modern, second)
            event = await asyncio.wait_for(anext(aiter(updates)), 60)
            assert isinstance(event, ResourceUpdated) and event.uri == report_uri
        assert (workspace / "b.txt").read_text() == "b"
