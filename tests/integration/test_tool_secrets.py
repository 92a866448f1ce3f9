"""A plugin tool that asks the run's user for a secret before each call (`secret_prompt`):
the call waits on a `secret_ref` interaction, runs with the value the user gave (the tool
gets it in its context, by reference), and the value is in no table, event or model
request; a declined request tells the model, and the tool does not run."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from keel.worker.scripted.llm import Conversation, Script, ScriptedToolCall, Turn
from tests.conftest import auth_headers
from tests.integration.keel_http import LaunchKeel, pending, run_reaches
from tests.integration.test_replay import HISTORIES, replayer
from tests.integration.test_user_credentials import readable_tables
from tests.plugin_dists import install_module, on_path

VAULT = """
from pydantic import BaseModel
from keel.worker.plugins import Plugin, PluginTool

RECEIVED = []

class Args(BaseModel):
    name: str

def read(args, context):
    RECEIVED.append(context.secret)
    return f"opened {args.name} with a passphrase of {len(context.secret)} characters"

plugin = Plugin(
    manifest={"name": "vaulty", "version": "1.0.0", "kinds": ["tool"]},
    tools=[PluginTool(name="vault_read", description="Read an entry of the vault.",
                      args_model=Args, risk="read", run=read,
                      secret_prompt="The vault's passphrase, please.")],
)
"""


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[list[str | None]]:
    site = tmp_path / "site"
    site.mkdir()
    modules = install_module(site, "vaulty", "vaulty_tool", VAULT, {"vaulty": "vaulty_tool:plugin"})
    with on_path(site, modules):
        agents = tmp_path / "agents"
        agents.mkdir()
        (agents / "keeper.md").write_text(
            "---\nname: keeper\ndescription: Reads the vault.\ntools: [vault_read]\n---\n"
            "You read entries of the vault.\n"
        )
        import vaulty_tool  # type: ignore[import-not-found]

        yield vaulty_tool.RECEIVED


def reads(who: str) -> Conversation:
    return Conversation(
        match=f"vault for {who}",
        turns=[
            Turn(tool_calls=[ScriptedToolCall(name="vault_read", arguments={"name": "db"})]),
            Turn(content="Done."),
        ],
    )


async def test_a_plugin_tool_gets_the_secret_its_user_gives_and_nothing_else_does(
    keel_app: LaunchKeel,
    temporal_client: Client,
    vault: list[str | None],
    workspace: Path,
    tmp_path: Path,
    database_url: str,
) -> None:
    tenant = f"vault-{uuid.uuid4().hex[:8]}"
    alice = auth_headers(tenant, "alice")
    secret = f"passphrase-{uuid.uuid4().hex}"
    script = Script(turns=[Turn(content="unused")], conversations=[reads("alice"), reads("bob")])
    async with keel_app(script, agents_dir=tmp_path / "agents", headers=alice) as http:

        async def start(who: str) -> str:
            created = await http.post(
                "/v1/runs",
                headers=auth_headers(tenant, who),
                json={
                    "agent": "keeper",
                    "input": f"Open the vault for {who}.",
                    "workspace": str(workspace),
                },
            )
            assert created.status_code == 201, created.text
            return str(created.json()["id"])

        run_id = await start("alice")
        [asked] = await pending(http, run_id, headers=alice)
        assert asked["kind"] == "secret_ref" and asked["tool"] == "vault_read"
        assert asked["question"] == "The vault's passphrase, please."
        assert vault == []  # nothing ran before the secret was given
        given = await http.post(
            f"/v1/runs/{run_id}/interactions/{asked['id']}",
            json={"decision": "answer", "secret": secret},
        )
        assert given.status_code == 200, given.text
        run = await run_reaches(http, run_id, within=60)
        assert run["status"] == "completed", run
        assert vault == [secret]  # the tool got the very value
        events = await http.get(f"/v1/runs/{run_id}/events/stream")
        assert f"a passphrase of {len(secret)} characters" in events.text  # the tool's output

        # Bob declines: the model is told, the tool does not run.
        bobs = await start("bob")
        bob = auth_headers(tenant, "bob")
        [ask] = await pending(http, bobs, headers=bob)
        declined = await http.post(
            f"/v1/runs/{bobs}/interactions/{ask['id']}", headers=bob, json={"decision": "reject"}
        )
        assert declined.status_code == 200, declined.text
        run = await run_reaches(http, bobs, headers=bob, within=60)
        assert run["status"] == "completed", run
        told = await http.get(f"/v1/runs/{bobs}/events/stream", headers=bob)
        assert "declined to give the secret vault_read needs" in told.text
        assert vault == [secret]
    for where, text in {
        "Postgres": await readable_tables(database_url),
        "SSE events": events.text,
    }.items():
        assert secret not in text, f"the secret is in the {where}"
    history = await temporal_client.get_workflow_handle(run_id).fetch_history()
    assert (await replayer().replay_workflow(history)).replay_failure is None
    assert secret not in history.to_json()
    if os.environ.get("KEEL_RECORD_HISTORY"):
        # KEEL_RECORD_HISTORY=1: keep this run's history for test_replay.
        target = HISTORIES / "agent_run_tool_secret.json"
        target.write_text(json.dumps(history.to_json_dict(), indent=1))
