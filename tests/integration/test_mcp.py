"""Keel's MCP server over real HTTP, driven by the `mcp` package's own client."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.exceptions import OAuthRegistrationError
from mcp.client.auth.utils import extract_resource_metadata_from_www_auth
from mcp.client.client import ConnectMode
from mcp.client.session import LoggingFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata, ProtectedResourceMetadata
from mcp.shared.exceptions import MCPError
from mcp_types import LoggingLevel, TextContent

from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.api.core.router import router_agent
from keel.api.identity.auth import dev_token
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import LaunchKeel, base_url
from tests.integration.test_subagents import delegating_review

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
TOOLS = {
    "list_agents",
    "start_run",
    "get_run",
    "list_runs",
    "decide",
    "fork_run",
    "list_files",
    "read_file",
    "search_code",
}
FINISHED = ("completed", "failed", "cancelled")
UNUSED = Script(turns=[Turn(content="unused")])
"""The model of a test that starts no run."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}


@asynccontextmanager
async def mcp_client(
    api_url: str,
    token: str | None,
    mode: ConnectMode = "auto",
    *,
    log_level: LoggingLevel | None = None,
    on_log: LoggingFnT | None = None,
) -> AsyncIterator[Client]:
    """An MCP client of `/mcp` sending `token` as its bearer token, as a desktop client would."""
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(90.0)) as http,
        Client(
            streamable_http_client(f"{api_url}/mcp", http_client=http),
            mode=mode,
            cache=None,
            log_level=log_level,
            logging_callback=on_log,
        ) as client,
    ):
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The text of a tool error; fails if the call succeeded."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def until_run(
    client: Client, run_id: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    for _ in range(600):
        detail = await call(client, "get_run", run_id=run_id)
        if done(detail):
            return detail
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never got there")


async def test_tools_and_prompts_are_listed_and_a_token_is_required(
    keel_app: LaunchKeel,
) -> None:
    catalog = AgentCatalog.load()
    async with keel_app(UNUSED, headers={}, worker=False) as http:
        url = base_url(http)
        for mode in ("auto", "legacy"):
            # `legacy` is the initialize handshake most desktop clients still use.
            async with mcp_client(url, token_for(), mode=mode) as client:
                # Only what works is declared: subscriptions only where a request's own
                # stream carries them (2026-07-28's subscriptions/listen), none to the
                # stateless handshake era (test_mcp_notifications.py has the rest).
                resources = client.server_capabilities.resources
                assert resources is not None
                assert bool(resources.subscribe) is (mode == "auto")
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert set(tools) == TOOLS
                assert tools["start_run"].input_schema["required"] == [
                    "agent",
                    "input",
                    "workspace",
                ]
                assert all(tool.description for tool in tools.values())

                prompts = {p.name: p for p in (await client.list_prompts()).prompts}
                assert set(prompts) == {*catalog.names(), "code_review"}
                for agent in catalog.all():
                    prompt = prompts[agent.name]
                    assert prompt.description == agent.description
                    [argument] = prompt.arguments or []
                    assert argument.name == "input" and argument.required

                build = catalog.get("build")
                assert build is not None
                got = await client.get_prompt("build", {"input": "Add a CHANGELOG entry."})
                texts = [m.content.text for m in got.messages if isinstance(m.content, TextContent)]
                assert texts == [build.system_prompt, "Add a CHANGELOG entry."]
                assert [m.role for m in got.messages] == ["user", "user"]

                listed = await call(client, "list_agents")
                assert listed["agents"] == [
                    {"name": a.name, "description": a.description}
                    for a in [*catalog.all(), router_agent()]
                ]

        async with httpx.AsyncClient(base_url=url) as http:
            missing = await http.post("/mcp", json=INITIALIZE)
            assert missing.status_code == 401
            assert missing.headers["www-authenticate"] == "Bearer"
            assert "needs a bearer token" in missing.json()["error"]["message"]
            assert missing.json()["detail"] == missing.json()["error"]["message"]

            forged = dev_token("another-secret-0123456789abcdef0123456789", "default", "eve")
            bad = await http.post(
                "/mcp", json=INITIALIZE, headers={"authorization": f"Bearer {forged}"}
            )
            assert bad.status_code == 401
            assert "signature does not verify" in bad.json()["error"]["message"]

            garbage = await http.post(
                "/mcp", json=INITIALIZE, headers={"authorization": "Bearer not-a-jwt"}
            )
            assert garbage.status_code == 401

            # The same request with a valid token is answered by the MCP server.
            ok = await http.post(
                "/mcp",
                json=INITIALIZE,
                headers={**auth_headers(), "accept": "application/json, text/event-stream"},
            )
            assert ok.status_code == 200, ok.text
            assert ok.json()["result"]["serverInfo"]["name"] == "keel"
            # Stateless: no event stream to hold open.
            stream = await http.get("/mcp", headers=auth_headers())
            assert stream.status_code == 405 and stream.headers["allow"] == "POST"
            # Bound to loopback, it answers only requests addressed to a loopback name.
            rebound = await http.post(
                "/mcp",
                json=INITIALIZE,
                headers={
                    **auth_headers(),
                    "accept": "application/json, text/event-stream",
                    "host": "attacker.example:8470",
                },
            )
            assert rebound.status_code == 421

        # An MCP client shows the refusal's sentence rather than a bare status.
        with pytest.raises(ExceptionGroup) as caught:
            async with mcp_client(url, None) as client:
                await client.list_tools()
        assert caught.group_contains(MCPError, match="needs a bearer token")


async def test_start_a_run_follow_it_to_its_report_and_refuse_bad_calls(
    store: Store, workspace: Path, tmp_path: Path, scripted: StartLLM, keel_app: LaunchKeel
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
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    # Tenants of this test alone, so the session's other runs do not show.
    tenant, other = f"mcp-{uuid.uuid4().hex[:8]}", f"mcp-other-{uuid.uuid4().hex[:8]}"
    run_id = f"mcp-run-{uuid.uuid4().hex[:8]}"
    async with (
        keel_app(llm, headers={}) as stack,
        mcp_client(base_url(stack), token_for(tenant, "alice")) as alice,
        mcp_client(base_url(stack), token_for(other, "mallory")) as mallory,
    ):
        start = {"agent": "review", "input": "Review it.", "workspace": str(workspace)}
        started = await call(alice, "start_run", **start, run_id=run_id)
        assert started["run_id"] == run_id and started["agent"] == "review"
        assert started["status"] in ("queued", "running")
        # A retried call with the same run id answers with the same run and starts nothing.
        again = await call(alice, "start_run", **start, run_id=run_id)
        assert again["run_id"] == run_id

        detail = await until_run(alice, run_id, lambda d: d["run"]["status"] in FINISHED)
        run = detail["run"]
        assert run["status"] == "completed" and run["stop_reason"] is not None
        assert "- pkg/core.py" in run["report"]
        assert run["usage"]["total_tokens"] == 240
        assert run["requester"] == "user:alice" and run["trigger"] == "api"
        assert detail["pending_interactions"] == []
        assert llm.total_requests == 2

        recent = await call(alice, "list_runs", limit=5)
        assert recent["runs"][0]["id"] == run_id
        assert recent["runs"][0]["status"] == "completed"

        # Without a run id, each call starts its own run.
        fresh = await call(alice, "start_run", **start)
        assert fresh["run_id"].startswith("run-") and fresh["run_id"] != run_id
        await until_run(alice, fresh["run_id"], lambda d: d["run"]["status"] in FINISHED)

        # Bad arguments come back as tool errors that say what to fix; nothing starts.
        unknown = await refused(alice, "start_run", **{**start, "agent": "nope"})
        assert "Unknown agent 'nope'" in unknown and "review" in unknown
        escaped = await refused(alice, "start_run", **{**start, "workspace": str(outside)})
        assert "outside the allowed root" in escaped
        relative_escape = await refused(alice, "start_run", **{**start, "workspace": "../.."})
        assert "outside the allowed root" in relative_escape
        no_input = await refused(alice, "start_run", agent="review", workspace=str(workspace))
        assert no_input == (
            "Error executing tool start_run: Invalid arguments: `input` is required. "
            "Correct them and call start_run again."
        )
        empty_input = await refused(alice, "start_run", **{**start, "input": ""})
        assert "`input`: The task is empty or only spaces" in empty_input, empty_input
        bad_id = await refused(alice, "start_run", **start, run_id="no spaces allowed")
        assert "`run_id`" in bad_id
        bad_limit = await refused(alice, "list_runs", limit=0)
        assert "`limit`" in bad_limit
        unknown_run = await refused(alice, "get_run", run_id="no-such-run")
        assert unknown_run.endswith("No run no-such-run.")
        assert len((await call(alice, "list_runs", limit=50))["runs"]) == 2
        assert llm.total_requests == 4

        # Another tenant's run does not exist for the caller, and the attempt is audited.
        assert f"No run {run_id}." in await refused(mallory, "get_run", run_id=run_id)
        decided = await refused(
            mallory, "decide", run_id=run_id, interaction_id="x", decision="reject"
        )
        assert f"No run {run_id}." in decided
        assert (await call(mallory, "list_runs"))["runs"] == []
        # Ids are per tenant: the same run id is a run of mallory's own, not "taken".
        theirs = await call(mallory, "start_run", **{**start, "input": "Mine."}, run_id=run_id)
        assert theirs["run_id"] == run_id
        assert [r["id"] for r in (await call(mallory, "list_runs"))["runs"]] == [run_id]
        mine = await call(alice, "get_run", run_id=run_id)
        assert mine["run"]["input"] != "Mine."

    denied = [
        e for e in await AuditLog(store.pool).entries(other, limit=1000) if e.subject == run_id
    ]
    assert [e.action for e in denied].count("run.cross_tenant_denied") == 2
    assert {e.actor for e in denied} == {"mallory"}


def write(path: str, content: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="write_file", arguments={"path": path, "content": content})


async def test_a_run_waiting_for_approval_is_decided_through_decide(
    workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[write("notes/out.txt", "hello")]),
                Turn(content="Wrote the file."),
            ]
        )
    )
    tenant = f"mcp-{uuid.uuid4().hex[:8]}"
    async with (
        keel_app(llm, headers={}) as stack,
        mcp_client(base_url(stack), token_for(tenant, "alice")) as alice,
        mcp_client(base_url(stack), token_for(tenant, "bob")) as bob,
        mcp_client(
            base_url(stack), token_for(f"mcp-other-{uuid.uuid4().hex[:8]}", "mallory")
        ) as mallory,
    ):
        url = base_url(stack)
        started = await call(
            alice,
            "start_run",
            agent="build",
            input="Make the change.",
            workspace=str(workspace),
        )
        run_id = started["run_id"]
        waiting = await until_run(alice, run_id, lambda d: bool(d["pending_interactions"]))
        assert waiting["run"]["status"] == "waiting"
        [ia] = waiting["pending_interactions"]
        assert ia["tool"] == "write_file" and ia["subject"] == "notes/out.txt"
        assert ia["arguments"] == {"path": "notes/out.txt", "content": "hello"}
        assert ia["approvers"] == ["user:alice"] and len(ia["payload_hash"]) == 64
        assert waiting["run"]["pending_interactions"] == [ia["id"]]

        decision = {"run_id": run_id, "interaction_id": ia["id"]}
        approve = {**decision, "decision": "approve", "payload_hash": ia["payload_hash"]}
        wrong = await refused(alice, "decide", **{**approve, "payload_hash": "0" * 64})
        assert "does not match" in wrong
        not_approver = await refused(bob, "decide", **approve)
        assert "user:bob may not decide" in not_approver
        assert f"No run {run_id}." in await refused(mallory, "decide", **approve)
        malformed = await refused(alice, "decide", **{**approve, "decision": "yes"})
        assert "`decision`" in malformed
        bad_hash = await refused(alice, "decide", **{**approve, "payload_hash": "abc"})
        assert "`payload_hash`" in bad_hash
        unknown = await refused(alice, "decide", **{**approve, "interaction_id": "nope"})
        assert f"No interaction nope in run {run_id}." in unknown
        assert not (workspace / "notes" / "out.txt").exists()

        accepted = await call(alice, "decide", **approve)
        assert accepted["status"] == "accepted"
        assert accepted["interaction"]["status"] == "approved"
        assert accepted["interaction"]["decided_by"] == "user:alice"
        # A retry of the decision hears it took; another decision is refused.
        twice = await call(alice, "decide", **approve)
        assert twice["status"] == "accepted"
        assert twice["interaction"]["decided_by"] == "user:alice"
        other = await refused(alice, "decide", **{**approve, "decision": "reject"})
        assert "already resolved" in other or "already executed" in other

        done = await until_run(alice, run_id, lambda d: d["run"]["status"] in FINISHED)
        assert done["run"]["status"] == "completed"
        assert done["run"]["report"] == "Wrote the file."
        assert done["pending_interactions"] == []
        assert (workspace / "notes" / "out.txt").read_text() == "hello"

        # A request nobody answered in time expires; deciding it then says so.
        async with httpx.AsyncClient(base_url=url, headers=auth_headers(tenant)) as http:
            created = await http.post(
                "/v1/runs",
                json={
                    "agent": "build",
                    "input": "Make the change.",
                    "workspace": str(workspace),
                    "approval_expires_after_s": 1,
                },
            )
            assert created.status_code == 201, created.text
        late_run = created.json()["id"]
        late = await until_run(alice, late_run, lambda d: bool(d["pending_interactions"]))
        [late_ia] = late["pending_interactions"]
        await until_run(alice, late_run, lambda d: d["run"]["status"] in FINISHED)
        expired = await refused(
            alice,
            "decide",
            run_id=late_run,
            interaction_id=late_ia["id"],
            decision="approve",
            payload_hash=late_ia["payload_hash"],
        )
        assert "already expired" in expired
    assert llm.total_requests == 4


class NoTokens:
    """A client's token storage that holds nothing yet: a client connecting for the first time."""

    async def get_tokens(self) -> None:
        return None

    async def set_tokens(self, tokens: object) -> None:
        raise AssertionError("no token can be issued")

    async def get_client_info(self) -> None:
        return None

    async def set_client_info(self, client_info: object) -> None:
        raise AssertionError("no client can be registered")


async def test_a_client_without_a_header_is_told_which_header_to_send(
    keel_app: LaunchKeel,
) -> None:
    """With the local secret there is no authorization server: the SDK's OAuth discovery,
    as a current client runs it on a 401, ends in the sentence naming the header."""
    async with keel_app(UNUSED, headers={}, worker=False) as stack:
        url = base_url(stack)
        oauth = OAuthClientProvider(
            server_url=f"{url}/mcp",
            client_metadata=OAuthClientMetadata(redirect_uris=["http://127.0.0.1:1/callback"]),
            storage=NoTokens(),
        )
        with pytest.raises(ExceptionGroup) as caught:
            async with (
                httpx2.AsyncClient(auth=oauth, timeout=30) as http,
                Client(streamable_http_client(f"{url}/mcp", http_client=http), cache=None) as c,
            ):
                await c.list_tools()
        assert caught.group_contains(OAuthRegistrationError, match="keel token --ttl")

        async with httpx.AsyncClient(base_url=url) as plain:
            missing = await plain.post("/mcp", json=INITIALIZE)
            assert missing.headers["www-authenticate"] == "Bearer"
            for path in (
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-authorization-server",
            ):
                answer = await plain.get(path)
                assert answer.status_code == 404
                assert "Authorization: Bearer <token>" in answer.json()["error_description"]


async def test_with_an_issuer_the_401_points_at_protected_resource_metadata(
    keel_app: LaunchKeel,
) -> None:
    issuer = "https://idp.example.com/realms/keel"
    async with keel_app(
        UNUSED,
        headers={},
        worker=False,
        jwks_url="https://idp.example.com/realms/keel/certs",
        jwt_issuer=issuer,
        jwt_secret=None,
    ) as http:
        url = base_url(http)
        missing = await http.post("/mcp", json=INITIALIZE)
        assert missing.status_code == 401
        where = extract_resource_metadata_from_www_auth(missing)  # type: ignore[arg-type]
        assert where == f"{url}/.well-known/oauth-protected-resource/mcp"
        answer = await http.get(where)
        assert answer.status_code == 200
        metadata = ProtectedResourceMetadata.model_validate_json(answer.content)
        assert str(metadata.resource) == f"{url}/mcp"
        assert [str(s) for s in metadata.authorization_servers] == [issuer]
        assert metadata.bearer_methods_supported == ["header"]
        root = await http.get("/.well-known/oauth-protected-resource")
        assert root.json() == answer.json()
        # Discovery goes on at the issuer: Keel answers for no authorization server itself.
        assert (await http.get("/.well-known/oauth-authorization-server")).status_code == 404


async def test_resources_list_the_runs_started_not_their_sub_agent_runs(
    workspace: Path, keel_app: LaunchKeel
) -> None:
    """As REST and list_runs: a review that delegates lists as one run, not three."""
    async with (
        keel_app(delegating_review(), headers={}) as http,
        mcp_client(base_url(http), token_for(f"mcp-{uuid.uuid4().hex[:8]}", "alice")) as alice,
    ):
        started = await call(
            alice, "start_run", agent="review", input="Review it.", workspace=str(workspace)
        )
        run_id = started["run_id"]
        detail = await until_run(alice, run_id, lambda d: d["run"]["status"] in FINISHED)
        assert detail["run"]["status"] == "completed"
        assert len(detail["run"]["children"]) == 2
        uris = [str(r.uri) for r in (await alice.list_resources()).resources]
        runs = [u for u in uris if u.startswith("keel://runs/")]
        assert runs == [f"keel://runs/{run_id}", f"keel://runs/{run_id}/report"]
        listed = await call(alice, "list_runs")
        assert [r["id"] for r in listed["runs"]] == [run_id]
