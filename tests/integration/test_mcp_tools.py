"""Agents use tools of external MCP servers: a real server, worker, model and Postgres."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.types import Receive, Scope, Send
from temporalio.client import Client, WorkflowHandle

from keel.activities.store.run_store import Store
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.workflows.interactions.models import Interaction, InteractionDecision
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.models import RunResult
from tests.conftest import in_process_worker
from tests.integration.keel_http import LaunchKeel
from tests.integration.runs import start_run

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
TOKEN = "mcp-token-7f3a9c1e5b"


@dataclass
class TicketServer:
    """A small MCP server over streamable HTTP, recording what reached it."""

    url: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)

    def app(self) -> Any:
        server = MCPServer(name="tickets", log_level="WARNING")

        @server.tool()
        def lookup(ticket: str) -> str:
            """Look up a ticket by its id, e.g. T-1."""
            self.calls.append(("lookup", {"ticket": ticket}))
            return f"Ticket {ticket}: open, owner alice"

        @server.tool()
        def explode() -> str:
            """Always fails."""
            self.calls.append(("explode", {}))
            raise ToolError("the ticket database is on fire")

        @server.tool()
        def close_ticket(ticket: str) -> str:
            """Close a ticket (not on the agent's allowlist)."""
            self.calls.append(("close_ticket", {"ticket": ticket}))
            return "closed"

        inner = server.streamable_http_app(stateless_http=True, json_response=True)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                value = headers.get(b"authorization")
                self.authorizations.append(value.decode() if value else None)
            await inner(scope, receive, send)

        return app


@asynccontextmanager
async def serving(tickets: TicketServer) -> AsyncIterator[TicketServer]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(tickets.app(), host="127.0.0.1", port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        assert server.started, "the MCP server did not start"
        tickets.url = f"http://127.0.0.1:{port}/mcp"
        yield tickets
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)


def helpdesk(agents_dir: Path, servers: list[dict[str, Any]], permissions: str = "[]") -> AgentSpec:
    """An agent from a file of a user's agents directory, as a worker loads it."""
    agents_dir.mkdir(exist_ok=True)
    (agents_dir / "helpdesk.md").write_text(
        "---\n"
        "name: helpdesk\n"
        "description: Answers questions about tickets.\n"
        "tools: [read_file]\n"
        f"mcp_servers: {json.dumps(servers)}\n"
        f"permissions: {permissions}\n"
        "---\n"
        "You answer questions about tickets with the tickets tools.\n"
    )
    spec = AgentCatalog.load(agents_dir).get("helpdesk")
    assert spec is not None
    return spec


def tickets_server(url: str) -> dict[str, Any]:
    return {"name": "tickets", "url": url, "tools": ["lookup", "explode"]}


def call(name: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=arguments)


def tool_messages(llm: ScriptedLLMServer, turn: int) -> list[str]:
    return [m["content"] for m in llm.last_request(turn)["messages"] if m["role"] == "tool"]


async def history_text(handle: WorkflowHandle[Any, Any]) -> str:
    """The run's history with every payload decoded, as one text."""
    texts: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if "metadata" in value and isinstance(value.get("data"), str):
                texts.append(base64.b64decode(value["data"]).decode(errors="replace"))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    history = (await handle.fetch_history()).to_json_dict()
    walk(history)
    return json.dumps(history) + "\n".join(texts)


async def pending(handle: WorkflowHandle[Any, Any]) -> Interaction:
    for _ in range(600):
        interactions = await handle.query(AgentRunWorkflow.list_interactions)
        waiting = [i for i in interactions if i.status == "pending"]
        if waiting:
            return waiting[0]
        await asyncio.sleep(0.05)
    raise AssertionError("the run never asked for approval")


async def approve(handle: WorkflowHandle[Any, Any], interaction: Interaction) -> None:
    await handle.execute_update(
        AgentRunWorkflow.decide,
        InteractionDecision(
            interaction_id=interaction.id,
            decision="approve",
            approver="anonymous",
            payload_hash=interaction.payload_hash,
        ),
    )


async def test_mcp_tools_are_offered_and_an_approved_call_runs_once_with_the_token(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[call("mcp__tickets__lookup", ticket="T-7")]),
                Turn(content="T-7 is open."),
            ]
        )
    )
    async with serving(TicketServer()) as tickets:
        origin = tickets.url.removesuffix("/mcp")
        settings = settings_for(
            llm,
            workspace,
            agents_dir=tmp_path / "agents",
            mcp_tokens={origin: TOKEN, "http://127.0.0.1:1": "not-this-one"},
        )
        spec = helpdesk(tmp_path / "agents", [tickets_server(tickets.url)])
        async with in_process_worker(temporal_client, store, settings):
            handle = await start_run(temporal_client, settings, workspace, spec=spec)
            asked = await pending(handle)
            # No rule: an external tool asks, and shows what it would send.
            assert asked.tool == "mcp__tickets__lookup"
            assert asked.risk == "external"
            assert asked.subject == '{"ticket":"T-7"}'
            assert tickets.calls == []
            await approve(handle, asked)
            result: RunResult = await handle.result()
            interactions = await handle.query(AgentRunWorkflow.list_interactions)

    assert result.status == "completed", result
    assert [i.status for i in interactions] == ["executed"]
    offered = {t["function"]["name"]: t["function"] for t in llm.last_request(0)["tools"]}
    assert set(offered) == {"read_file", "mcp__tickets__lookup", "mcp__tickets__explode"}
    lookup = offered["mcp__tickets__lookup"]
    assert lookup["description"] == "Look up a ticket by its id, e.g. T-1."
    assert lookup["parameters"]["properties"]["ticket"]["type"] == "string"
    assert lookup["parameters"]["required"] == ["ticket"]
    assert tool_messages(llm, 1) == ["Ticket T-7: open, owner alice"]
    assert tickets.calls == [("lookup", {"ticket": "T-7"})]
    assert tickets.authorizations and set(tickets.authorizations) == {f"Bearer {TOKEN}"}

    events = await store.list_events(handle.id)
    assert [e.type for e in events if e.type.startswith("tool_")] == ["tool_call", "tool_result"]
    assert TOKEN not in json.dumps([e.data for e in events])
    history = await history_text(handle)
    assert TOKEN not in history
    # The history names the tools; their descriptions and schemas stay in Postgres.
    assert "mcp__tickets__lookup" in history
    assert "Look up a ticket" not in history


async def test_a_rule_for_the_server_runs_its_tools_and_errors_reach_the_model(
    temporal_client: Client,
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
                        call("mcp__tickets__lookup", ticket=7),
                        call("mcp__tickets__explode"),
                        call("mcp__tickets__lookup", ticket="T-1"),
                        call("mcp__tickets__close_ticket", ticket="T-1"),
                        ScriptedToolCall(name="mcp__tickets__lookup", arguments='["T-1"]'),
                    ]
                ),
                Turn(content="Done."),
            ]
        )
    )
    async with serving(TicketServer()) as tickets:
        settings = settings_for(llm, workspace)
        spec = helpdesk(
            tmp_path / "agents",
            [tickets_server(tickets.url)],
            permissions='[{permission: "mcp:tickets:*", pattern: "*", action: allow}]',
        )
        async with in_process_worker(temporal_client, store, settings):
            handle = await start_run(temporal_client, settings, workspace, spec=spec)
            result: RunResult = await handle.result()
            interactions = await handle.query(AgentRunWorkflow.list_interactions)

    assert result.status == "completed", result
    assert interactions == []
    invalid, failed, found, unlisted, not_an_object = tool_messages(llm, 1)
    assert invalid.startswith("Error: invalid arguments for mcp__tickets__lookup: ticket: ")
    assert "7 is not of type 'string'" in invalid
    # The server's own text (the SDK's server leads it with its own words), marked.
    assert failed.startswith("Error: the tool explode reported an error: ")
    assert failed.endswith("the ticket database is on fire")
    assert found == "Ticket T-1: open, owner alice"
    assert unlisted.startswith("Error: unknown tool 'mcp__tickets__close_ticket'.")
    assert "mcp__tickets__lookup, mcp__tickets__explode" in unlisted
    assert not_an_object == "Error: the arguments of mcp__tickets__lookup must be a JSON object."
    # Invalid arguments and tools off the allowlist never reach the server.
    assert tickets.calls == [("explode", {}), ("lookup", {"ticket": "T-1"})]
    results = [e.data for e in await store.list_events(handle.id) if e.type == "tool_result"]
    assert [r["is_error"] for r in results] == [True, True, False, True, True]
    # No token is configured for this server, so none was sent.
    assert set(tickets.authorizations) == {None}


async def test_a_server_that_is_down_gives_the_model_an_error_not_a_crashed_run(
    temporal_client: Client,
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
                        call("mcp__backlog__search", text="stale"),
                        call("mcp__tickets__lookup", ticket="T-2"),
                    ]
                ),
                Turn(content="The backlog is unavailable; the tickets server went away."),
            ]
        )
    )
    tickets = TicketServer()
    async with serving(tickets):
        settings = settings_for(llm, workspace)
        nobody = f"http://127.0.0.1:{free_port()}/mcp"
        spec = helpdesk(
            tmp_path / "agents",
            [tickets_server(tickets.url), {"name": "backlog", "url": nobody}],
        )
        async with in_process_worker(temporal_client, store, settings):
            handle = await start_run(temporal_client, settings, workspace, spec=spec)
            asked = await pending(handle)
    # The tickets server stops while the call waits for its approval.
    async with in_process_worker(temporal_client, store, settings):
        await approve(handle, asked)
        result: RunResult = await handle.result()

    assert result.status == "completed", result
    offered = [t["function"]["name"] for t in llm.last_request(0)["tools"]]
    assert offered == ["read_file", "mcp__tickets__lookup", "mcp__tickets__explode"]
    backlog, lookup = tool_messages(llm, 1)
    assert backlog.startswith(
        "Error: the MCP server 'backlog' could not be reached when this run started"
    )
    assert lookup.startswith(f"Error: the MCP server at {tickets.url} could not be reached")
    assert "lookup did not run" in lookup
    assert tickets.calls == []


async def test_a_call_an_earlier_attempt_claimed_is_never_sent_again(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[call("mcp__tickets__lookup", ticket="T-3")]),
                Turn(content="Unknown."),
            ]
        )
    )
    async with serving(TicketServer()) as tickets:
        settings = settings_for(llm, workspace)
        spec = helpdesk(tmp_path / "agents", [tickets_server(tickets.url)])
        async with in_process_worker(temporal_client, store, settings):
            handle = await start_run(temporal_client, settings, workspace, spec=spec)
            asked = await pending(handle)
            # As if a worker had started the call and died before storing its output.
            assert await store.claim_execution(handle.id, asked.step, asked.ord, "dead")
            assert await store.execution_starts(handle.id, asked.step, asked.ord, "dead")
            await approve(handle, asked)
            result: RunResult = await handle.result()

    assert result.status == "completed", result
    [answer] = tool_messages(llm, 1)
    assert answer.startswith("Error: the worker stopped after this mcp__tickets__lookup call")
    assert "It was not run again." in answer
    assert tickets.calls == []


async def test_the_agents_list_names_the_mcp_servers_an_agent_uses(
    tmp_path: Path, keel_app: LaunchKeel
) -> None:
    helpdesk(tmp_path / "agents", [tickets_server("http://127.0.0.1:9/mcp")])
    unused = Script(turns=[Turn(content="unused")])
    async with keel_app(unused, worker=False, agents_dir=tmp_path / "agents") as http:
        agents = {a["name"]: a for a in (await http.get("/v1/agents")).json()}
    assert agents["helpdesk"]["mcp_servers"] == ["tickets"]
    assert agents["review"]["mcp_servers"] == []
