"""Field-level masking end to end: a plugin tool returns personal data as JSON; the
readable copies Keel keeps (events over REST and SSE, the stored tool output the console
opens, the audit log, the messages table) hold masked values, the model read the
originals, and an original comes back only with keel:read-original, after the audit
entry of the read has committed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from keel.activities.masking import MaskingPolicy
from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.payload_codec import data_converter, new_key
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from keel.worker.temporal_client import connect
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import (
    ALICE,
    MakeSettings,
    StartLLM,
    base_url,
    finished,
    keel_api,
)
from tests.integration.test_cli import clean_env
from tests.integration.test_cli import keel as keel_cli
from tests.integration.test_mcp_tools import call, tool_messages
from tests.plugin_dists import install_module, on_path

NAME, SSN, SALARY, PHONE = "Ada Lovelace", "123-45-6789", 72000, "+44 20 7946 0958"
DENIED_SSN = "000-12-3456"
# What must not be readable anywhere Keel keeps a readable copy.
PLAINTEXT = (NAME, SSN, "7946 0958", DENIED_SSN, "72000")
READER = auth_headers("default", "dpo", "keel:read-original")
ADMIN = auth_headers("default", "root", "keel:admin")
OTHER_READER = auth_headers("other-tenant", "eve", "keel:read-original", "keel:admin")

HR_PLUGIN = f"""
import json
from pydantic import BaseModel, ConfigDict
from keel.worker.plugins import Plugin, PluginTool

class Lookup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ssn: str

def lookup(args, context):
    return json.dumps({{"employees": [{{"name": {NAME!r}, "ssn": args.ssn,
        "salary": {SALARY}, "phone": {PHONE!r}, "team": "engines"}}]}})

plugin = Plugin(
    manifest={{"name": "hr", "version": "1.0.0", "kinds": ["tool"]}},
    tools=[PluginTool(name="lookup_employee", description="Look an employee up by SSN.",
                      args_model=Lookup, risk="read", run=lookup, subject_arg="ssn")],
)
"""
HR_AGENT = """---
name: hr
description: Answers questions about employees.
tools: [lookup_employee]
permissions:
  - {permission: lookup_employee, pattern: "000-*", action: deny}
---
You answer questions about employees with `lookup_employee`.
"""
POLICY = MaskingPolicy.model_validate(
    {
        "rules": [
            {"field": "name", "action": "hash"},
            {"field": "ssn", "action": "last", "keep": 4},
            {"path": "$.employees[*].salary", "action": "bracket", "bounds": [0, 50000, 100000]},
            {"field": "phone", "action": "mask"},
        ]
    }
)


@dataclass
class Keel:
    http: httpx.AsyncClient
    settings: Settings
    llm: ScriptedLLMServer


@pytest.fixture
def hr_plugin(tmp_path: Path) -> Iterator[Path]:
    site = tmp_path / "site"
    site.mkdir()
    modules = install_module(site, "hr", "hr_tools", HR_PLUGIN, {"hr": "hr_tools:plugin"})
    with on_path(site, modules):
        yield site


def keyed(settings: Settings, keys: dict[str, str]) -> Settings:
    return settings.model_copy(
        update={
            "payload_keys": Settings.model_validate({"KEEL_PAYLOAD_KEYS": keys}).payload_keys,
            "payload_key_id": next(iter(keys)),
            "api_port": free_port(),
        }
    )


@asynccontextmanager
async def masked_keel(
    store: Store, settings_for: MakeSettings, llm: ScriptedLLMServer, workspace: Path
) -> AsyncIterator[Keel]:
    agents = workspace.parent / "agents"
    agents.mkdir(exist_ok=True)
    (agents / "hr.md").write_text(HR_AGENT)
    base = settings_for(llm, workspace, agents_dir=agents, masking_policy=POLICY)
    settings = keyed(base, {"k1": new_key()})
    client = await connect(str(settings.temporal_address), data_converter=data_converter(settings))
    async with keel_api(client, store, settings, headers=ALICE) as http:
        yield Keel(http=http, settings=settings, llm=llm)


def lookup_script() -> Script:
    return Script(
        turns=[
            Turn(
                tool_calls=[
                    call("lookup_employee", ssn=SSN),
                    call("lookup_employee", ssn=DENIED_SSN),
                ]
            ),
            # The same lookup again: the gate answers it with a copy of the first answer.
            Turn(tool_calls=[call("lookup_employee", ssn=SSN)]),
            Turn(content="Found one employee in the engines team."),
        ]
    )


async def masked_run(keel: Keel, workspace: Path) -> str:
    response = await keel.http.post(
        "/v1/runs", json={"agent": "hr", "input": "Who is it?", "workspace": str(workspace)}
    )
    assert response.status_code == 201, response.text
    run_id = str(response.json()["id"])
    assert (await finished(keel.http, run_id))["status"] == "completed"
    return run_id


async def rows(database_url: str, sql: str, *params: object) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cur = await conn.execute(sql, params)  # type: ignore[arg-type]
        return list(await cur.fetchall())


async def readable_tables(database_url: str, run_id: str) -> str:
    """Every readable copy of the run Postgres holds, as text."""
    found = []
    for sql in (
        "SELECT data::text AS t FROM events WHERE run_id = %s",
        "SELECT coalesce(content, '') || coalesce(tool_calls::text, '') AS t"
        " FROM messages WHERE run_id = %s AND role = 'tool'",
        "SELECT detail::text AS t FROM audit_log WHERE subject LIKE %s || '%%'",
    ):
        found += [row["t"] for row in await rows(database_url, sql, run_id)]
    return "\n".join(found)


def assert_masked(text: str, where: str) -> None:
    for value in PLAINTEXT:
        assert value not in text, f"{value!r} is readable in {where}"


async def test_readable_copies_are_masked_and_the_model_reads_the_originals(
    hr_plugin: Path,
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(lookup_script())
    async with masked_keel(store, settings_for, llm, workspace) as keel:
        run_id = await masked_run(keel, workspace)
        http = keel.http

        # The model read the original output: it needs the real values to work.
        [seen, denied] = tool_messages(llm, 1)
        assert json.loads(seen)["employees"][0]["ssn"] == SSN
        assert "denied by policy" in denied and DENIED_SSN in denied
        *earlier, cached = tool_messages(llm, 2)
        # The cached copy reads as the first answer did: the original.
        assert earlier == [seen, denied] and cached == seen

        # Events over REST: the call's arguments and the result's preview, masked.
        events = (await http.get(f"/v1/runs/{run_id}/events")).json()["events"]
        assert_masked(json.dumps(events), "the events (REST)")
        calls = [e for e in events if e["type"] == "tool_call"]
        assert json.loads(calls[0]["data"]["arguments"]) == {"ssn": "***-**-6789"}
        assert json.loads(calls[1]["data"]["arguments"]) == {"ssn": "***-**-3456"}
        first_result = next(e for e in events if e["type"] == "tool_result")
        assert "***-**-6789" in first_result["data"]["preview"]

        # Events over SSE, as the console's timeline reads them.
        async with http.stream("GET", f"/v1/runs/{run_id}/events/stream") as response:
            streamed = "".join([chunk async for chunk in response.aiter_text()])
        assert '"tool_result"' in streamed
        assert_masked(streamed, "the event stream (SSE)")

        # The whole stored output, which the console's timeline opens: masked field by field.
        call_id = calls[0]["data"]["call_id"]
        stored = await http.get(f"/v1/runs/{run_id}/tool-outputs/1/{call_id}")
        assert stored.status_code == 200, stored.text
        [employee] = json.loads(stored.json()["content"])["employees"]
        assert employee["name"].startswith("hash:") and len(employee["name"]) == 21
        assert employee["ssn"] == "***-**-6789"
        assert employee["salary"] == "50000-100000"
        assert employee["phone"] == "+44 ** **** ****"
        assert employee["team"] == "engines"  # no rule names it

        # Postgres's readable tables (events, tool messages, audit details) and the sealed
        # originals' bytes: no plaintext in any.
        assert_masked(await readable_tables(database_url, run_id), "Postgres's readable tables")
        denials = await rows(
            database_url,
            "SELECT detail FROM audit_log WHERE subject LIKE %s AND action = %s",
            f"{run_id}/%",
            "tool.denied_by_policy",
        )
        assert [json.loads(d["detail"]["arguments"]) for d in denials] == [{"ssn": "***-**-3456"}]
        sealed = await rows(
            database_url, "SELECT kind, sealed FROM masked_originals WHERE run_id = %s", run_id
        )
        assert {r["kind"] for r in sealed} == {"tool_output", "tool_arguments"}
        for row in sealed:
            assert_masked(bytes(row["sealed"]).decode("latin-1"), "a sealed original")


async def test_an_original_needs_read_original_and_its_read_is_audited_first(
    hr_plugin: Path,
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(lookup_script())
    async with masked_keel(store, settings_for, llm, workspace) as keel:
        run_id = await masked_run(keel, workspace)
        http = keel.http
        events = (await http.get(f"/v1/runs/{run_id}/events")).json()["events"]
        call_id = next(e for e in events if e["type"] == "tool_call")["data"]["call_id"]
        output_url = f"/v1/admin/originals/tool-output/{run_id}/1/{call_id}"

        # keel:admin alone is refused, and the refusal is audited.
        refused = await http.post(output_url, headers=ADMIN)
        assert refused.status_code == 403, refused.text
        assert "keel:read-original" in refused.json()["detail"]
        assert_masked(refused.text, "a refusal")
        # Another tenant's reader (an admin there too) finds nothing; audited as cross-tenant.
        foreign = await http.post(output_url, headers=OTHER_READER)
        assert foreign.status_code == 404, foreign.text
        assert_masked(foreign.text, "another tenant's answer")

        read = await http.post(output_url, headers=READER, json={"reason": "ticket HR-42"})
        assert read.status_code == 200, read.text
        body = read.json()
        [employee] = json.loads(body["original"])["employees"]
        assert (employee["name"], employee["ssn"], employee["salary"], employee["phone"]) == (
            NAME,
            SSN,
            SALARY,
            PHONE,
        )
        arguments = await http.post(
            f"/v1/admin/originals/tool-arguments/{run_id}/1/{call_id}", headers=READER
        )
        assert arguments.status_code == 200, arguments.text
        assert json.loads(arguments.json()["original"]) == {"ssn": SSN}

        # The answer names its audit entry, which was committed (another connection sees it).
        [entry] = await rows(
            database_url, "SELECT * FROM audit_log WHERE id = %s", body["audit_id"]
        )
        assert (entry["action"], entry["actor"], entry["tenant_id"]) == (
            "original.read",
            "dpo",
            "default",
        )
        assert entry["subject"] == f"{run_id}/1/{call_id}"
        assert entry["detail"]["reason"] == "ticket HR-42"
        actions = [
            (r["action"], r["actor"])
            for r in await rows(
                database_url,
                "SELECT action, actor FROM audit_log WHERE subject IN (%s, %s)"
                " AND (action LIKE 'original.%%' OR action LIKE '%%cross_tenant%%') ORDER BY id",
                f"{run_id}/1/{call_id}",
                run_id,
            )
        ]
        assert actions == [
            ("original.read_refused", "root"),
            ("run.cross_tenant_denied", "eve"),
            ("original.read", "dpo"),
            ("original.read", "dpo"),
        ]
        # A call with nothing masked has no original: a clear 404.
        missing = await http.post(
            f"/v1/admin/originals/tool-output/{run_id}/1/no-such-call", headers=READER
        )
        assert missing.status_code == 404


async def test_no_plaintext_leaves_without_its_committed_audit_entry(
    hr_plugin: Path,
    temporal_client: Any,
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(lookup_script())
    async with masked_keel(store, settings_for, llm, workspace) as keel:
        run_id = await masked_run(keel, workspace)
        events = (await keel.http.get(f"/v1/runs/{run_id}/events")).json()["events"]
        call_id = next(e for e in events if e["type"] == "tool_call")["data"]["call_id"]
        url = f"/v1/admin/originals/tool-output/{run_id}/1/{call_id}"

        def reads() -> Any:
            return rows(
                database_url,
                "SELECT id FROM audit_log WHERE action = 'original.read' AND subject = %s",
                f"{run_id}/1/{call_id}",
            )

        # The audit write fails (Postgres refuses the row): nothing is opened or returned.
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "CREATE FUNCTION refuse_original_reads() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN RAISE EXCEPTION 'the audit log is full'; END $$"
            )
            await conn.execute(
                "CREATE TRIGGER refuse_original_reads BEFORE INSERT ON audit_log FOR EACH ROW"
                " WHEN (NEW.action = 'original.read') EXECUTE FUNCTION refuse_original_reads()"
            )
            try:
                failed = await keel.http.post(url, headers=READER)
            finally:
                await conn.execute("DROP TRIGGER refuse_original_reads ON audit_log")
                await conn.execute("DROP FUNCTION refuse_original_reads()")
        assert failed.status_code >= 500, failed.text
        assert_masked(failed.text, "the answer to a read whose audit entry failed")
        assert await reads() == []

        # The answer fails after the entry committed (this API holds another key under the
        # same id, so the original does not open): no plaintext, and the entry stands.
        other = keyed(keel.settings, {"k1": new_key()})
        async with keel_api(temporal_client, store, other, worker=False) as second:
            broken = await second.post(url, headers=READER)
        assert broken.status_code == 500, broken.text
        assert "does not open" in broken.json()["detail"]
        assert_masked(broken.text, "the answer of an API that cannot open the original")
        assert len(await reads()) == 1

        # With its entry, the read answers.
        read = await keel.http.post(url, headers=READER)
        assert read.status_code == 200 and SSN in read.json()["original"]
        assert len(await reads()) == 2


@pytest.mark.slow  # two `keel` processes
async def test_keel_original_reads_with_the_scope_and_is_refused_without_it(
    hr_plugin: Path,
    store: Store,
    workspace: Path,
    database_url: str,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(lookup_script())
    async with masked_keel(store, settings_for, llm, workspace) as keel:
        run_id = await masked_run(keel, workspace)
        http = keel.http
        events = (await http.get(f"/v1/runs/{run_id}/events")).json()["events"]
        call_id = next(e for e in events if e["type"] == "tool_call")["data"]["call_id"]
        for_cli = clean_env(KEEL_API_URL=base_url(http))
        reader = {**for_cli, "KEEL_TOKEN": token_for("default", "dpo", "keel:read-original")}
        code, out = await keel_cli(
            "original", "tool-output", run_id, "1", call_id, "--reason", "cli", env=reader
        )
        assert code == 0, out
        assert SSN in out and "audit entry" in out
        admin = {**for_cli, "KEEL_TOKEN": token_for("default", "root", "keel:admin")}
        code, out = await keel_cli("original", "tool-output", run_id, "1", call_id, env=admin)
        assert code != 0 and "needs the keel:read-original scope" in out, out
        assert_masked(out, "the CLI's refusal")
        by_cli = await rows(
            database_url,
            "SELECT action, actor, detail FROM audit_log WHERE subject = %s"
            " AND action LIKE 'original.%%' ORDER BY id",
            f"{run_id}/1/{call_id}",
        )
        assert [(r["action"], r["actor"]) for r in by_cli] == [
            ("original.read", "dpo"),
            ("original.read_refused", "root"),
        ]
        assert by_cli[-2]["detail"]["reason"] == "cli"
