"""Memory by the less-travelled doors: an agent with `memory: true` that the router hands
a request to remembers for the user (its input is the user's own request, not a prompt a
parent agent wrote), and an admin purges a subject whose name holds a `/`."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, Turn
from tests.conftest import auth_headers
from tests.integration.keel_http import LaunchKeel, MakeSettings, StartLLM, finished, keel_api
from tests.integration.test_memory import AGENT, memories, memory_note
from tests.integration.test_replay import HISTORIES, replayer


async def test_a_routed_agent_with_memory_recalls_and_remembers_for_the_user(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    tenant = f"routed-{uuid.uuid4().hex[:6]}"
    alice, bob = auth_headers(tenant, "alice"), auth_headers(tenant, "bob")
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text(AGENT)
    llm = scripted(Script(turns=[Turn(content="Noted.")]))
    settings = settings_for(llm, workspace, api_port=free_port(), agents_dir=agents)

    async def routed(who: dict[str, str], text: str) -> dict:
        body = {
            "agent": "auto",
            "input": f"Ask the helper agent: {text}",
            "workspace": str(workspace),
        }
        response = await http.post("/v1/runs", headers=who, json=body)
        assert response.status_code == 201, response.text
        run = await finished(http, response.json()["id"], headers=who)
        assert run["status"] == "completed", run
        [child] = run["children"]
        assert child["agent"] == "helper"
        return run

    async with keel_api(temporal_client, store, settings) as http:
        first = await routed(alice, "I prefer tabs for indentation.")
        facts = {m["fact"]: m for m in await memories(http, alice)}
        assert "The user prefers tabs for indentation." in facts
        [child] = first["children"]
        assert facts["The user prefers tabs for indentation."]["source_run_id"] == child["id"]

        await routed(alice, "Which indentation should the new module use?")
        note = memory_note(llm)
        assert note is not None and "The user prefers tabs for indentation." in note

        await routed(bob, "Which indentation should the new module use?")
        assert memory_note(llm) is None
        assert await memories(http, bob) == []

        # The routed child's path (recall, the step, the facts kept) and its router's
        # replay; KEEL_RECORD_HISTORY=1 adds them to the histories future code must replay.
        for name, run_id in (("router", first["id"]), ("child", child["id"])):
            history = await temporal_client.get_workflow_handle(run_id).fetch_history()
            assert (await replayer().replay_workflow(history)).replay_failure is None
            if os.environ.get("KEEL_RECORD_HISTORY"):
                target = HISTORIES / f"agent_run_routed_memory_{name}.json"
                target.write_text(json.dumps(history.to_json_dict(), indent=1))


async def test_an_admin_purges_a_subject_that_holds_a_slash(keel_app: LaunchKeel) -> None:
    tenant = f"slash-{uuid.uuid4().hex[:6]}"
    admin = auth_headers(tenant, "root", "keel:admin")
    async with keel_app(Script(turns=[Turn(content="Noted.")]), headers=admin) as http:
        purged = await http.delete("/v1/admin/memories/team%2Fbob")
        assert purged.status_code == 200, purged.text
        assert purged.json() == {"tenant_id": tenant, "user": "team/bob", "deleted": 0}
