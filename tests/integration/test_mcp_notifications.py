"""What Keel's MCP server tells a client unasked-for-by-poll: run updates, progress while
`start_run` waits, and log messages; over real HTTP, driven by the `mcp` SDK's client."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LoggingMessageNotificationParams,
    TextResourceContents,
)

from keel.api.core.errors import Unavailable, store_unavailable
from keel.api.core.runs import RunService
from keel.worker.scripted.llm import Conversation, Script, Turn
from tests.conftest import token_for
from tests.integration.keel_http import LaunchKeel, base_url
from tests.integration.test_mcp import call, mcp_client, write


class Heard:
    """Progress and log messages a client received."""

    def __init__(self) -> None:
        self.progress: list[tuple[float, str | None]] = []
        self.logs: list[LoggingMessageNotificationParams] = []

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, message))

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append(params)


async def test_updates_progress_and_logs_over_http(workspace: Path, keel_app: LaunchKeel) -> None:
    script = Script(
        turns=[
            Turn(tool_calls=[write("notes/out.txt", "hello")]),
            Turn(content="Wrote the file."),
        ],
        conversations=[
            Conversation(match="Look it over.", turns=[Turn(content="Nothing to report.")])
        ],
    )
    tenant = f"mcp-{uuid.uuid4().hex[:8]}"
    heard = Heard()
    async with (
        keel_app(script, headers={}) as http,
        mcp_client(
            base_url(http), token_for(tenant, "alice"), log_level="info", on_log=heard.on_log
        ) as alice,
        mcp_client(
            base_url(http), token_for(f"mcp-other-{uuid.uuid4().hex[:8]}", "mallory")
        ) as mallory,
        mcp_client(base_url(http), token_for(tenant, "alice"), mode="legacy") as legacy,
    ):
        # Declared: 2026-07-28 listens and logs per request; the stateless handshake era
        # gets neither subscriptions nor a log level that could not outlive its request.
        modern_caps = alice.server_capabilities
        assert modern_caps.resources is not None and modern_caps.resources.subscribe
        assert modern_caps.logging is not None
        legacy_caps = legacy.server_capabilities
        assert legacy_caps.resources is not None and not legacy_caps.resources.subscribe
        assert legacy_caps.logging is None
        with pytest.warns(MCPDeprecationWarning), pytest.raises(MCPError, match="stateless"):
            await legacy.set_logging_level("info")

        # start_run waits until the run needs alice, with progress and log messages.
        result = await alice.call_tool(
            "start_run",
            {
                "agent": "build",
                "input": "Make the change.",
                "workspace": str(workspace),
                "wait": 60,
            },
            progress_callback=heard.on_progress,
        )
        assert not result.is_error, result.content
        started: dict[str, Any] = result.structured_content or {}
        run_id = started["run_id"]
        assert started["status"] == "waiting" and len(started["pending_interactions"]) == 1
        assert heard.progress and "waits for you" in (heard.progress[-1][1] or "")
        assert [p for p, _ in heard.progress] == sorted(p for p, _ in heard.progress)
        assert heard.logs[-1].level == "warning" and heard.logs[-1].logger == "keel.run"
        assert heard.logs[-1].data["run_id"] == run_id

        # Another tenant cannot listen to the run; an unknown URI is refused with a sentence.
        with pytest.raises(MCPError, match=f"No run {run_id}"):
            async with mallory.listen(resource_subscriptions=[f"keel://runs/{run_id}"]):
                pass
        with pytest.raises(MCPError, match="no Keel resource"):
            async with alice.listen(resource_subscriptions=["file:///etc/passwd"]):
                pass

        run_uri, report_uri = f"keel://runs/{run_id}", f"keel://runs/{run_id}/report"
        async with alice.listen(
            resource_subscriptions=[run_uri, report_uri], resources_list_changed=True
        ) as sub:
            assert set(sub.honored.resource_subscriptions or ()) == {run_uri, report_uri}
            assert not sub.honored.resources_list_changed  # it changes with every run
            detail = await call(alice, "get_run", run_id=run_id)
            [ia] = detail["pending_interactions"]
            await call(
                alice,
                "decide",
                run_id=run_id,
                interaction_id=ia["id"],
                decision="approve",
                payload_hash=ia["payload_hash"],
            )
            seen: list[str] = []

            async def until_report() -> None:
                async for event in sub:
                    assert isinstance(event, ResourceUpdated)
                    seen.append(event.uri)
                    if event.uri == report_uri:
                        return

            await asyncio.wait_for(until_report(), 60)
            assert seen[0] == run_uri and seen.count(report_uri) == 1
        report = await alice.read_resource(report_uri)
        [content] = report.contents
        assert isinstance(content, TextResourceContents) and content.text == "Wrote the file."

        # The handshake era gets progress on the tool call's own stream too.
        legacy_heard = Heard()
        done = await legacy.call_tool(
            "start_run",
            {"agent": "review", "input": "Look it over.", "workspace": str(workspace), "wait": 60},
            progress_callback=legacy_heard.on_progress,
        )
        finished: dict[str, Any] = done.structured_content or {}
        assert finished["status"] == "completed", finished
        assert finished["report"] == "Nothing to report."
        assert legacy_heard.progress and "completed" in (legacy_heard.progress[-1][1] or "")


async def test_a_wait_that_cannot_follow_the_run_still_answers_with_the_run_it_started(
    workspace: Path, keel_app: LaunchKeel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run started; only the wait failed (Temporal did not answer its reads): the
    answer names the run, so the client follows it instead of starting another."""

    async def unavailable(self: RunService, record: object) -> object:
        raise Unavailable("Temporal did not answer; retry shortly.")

    tenant = f"mcp-{uuid.uuid4().hex[:8]}"
    async with (
        keel_app(Script(turns=[Turn(content="Nothing to report.")]), headers={}) as http,
        mcp_client(base_url(http), token_for(tenant, "alice")) as alice,
    ):
        with monkeypatch.context() as patched:
            patched.setattr(RunService, "live", unavailable)
            result = await alice.call_tool(
                "start_run",
                {"agent": "review", "input": "Look.", "workspace": str(workspace), "wait": 30},
            )
        assert not result.is_error, result.content
        started: dict[str, Any] = result.structured_content or {}
        assert started["status"] in ("queued", "running")
        assert "waiting for it failed" in started["note"] and "Temporal" in started["note"]
        listed = await call(alice, "list_runs")
        assert [r["id"] for r in listed["runs"]] == [started["run_id"]]


async def test_listen_while_the_store_is_down_is_a_retryable_server_error(
    workspace: Path, keel_app: LaunchKeel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-32602 would tell the client its request is wrong; an outage is -32603, "retry"."""

    async def down(self: RunService, run_id: str, user: object, **_: object) -> object:
        raise store_unavailable()

    async with (
        keel_app(Script(turns=[Turn(content="Nothing to report.")]), headers={}) as http,
        mcp_client(base_url(http), token_for(f"mcp-{uuid.uuid4().hex[:8]}", "alice")) as alice,
    ):
        with monkeypatch.context() as patched:
            patched.setattr(RunService, "get", down)
            with pytest.raises(MCPError) as refused:
                async with alice.listen(resource_subscriptions=["keel://runs/some-run"]):
                    pass
        assert refused.value.code == INTERNAL_ERROR
        assert "Retry the listen in" in refused.value.error.message
        # Once the store answers, the same listen is a plain "No run".
        with pytest.raises(MCPError, match="No run some-run") as unknown:
            async with alice.listen(resource_subscriptions=["keel://runs/some-run"]):
                pass
        assert unknown.value.code == INVALID_PARAMS
