"""Tool backends called as the user: each run's calls carry its own user's token, obtained
by token exchange, refreshed after expiry, never another user's; a scheduled run carries
its owner's; a user with no credential is asked for one (`secret_ref`), answered through
`keel secret`, and the value reaches the backend and nowhere readable."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from temporalio.client import Client

from keel.activities.credentials.secret_store import MAX_SECRET_CHARS
from keel.activities.store.run_store import Store
from keel.worker.payload_codec import new_key, payload_codec
from keel.worker.scripted.llm import Conversation, Script, ScriptedToolCall, Turn
from keel.worker.temporal_client import connect
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import LaunchKeel, MakeSettings, StartLLM, pending, run_reaches
from tests.integration.test_cli import clean_env
from tests.integration.test_payload_codec import keel_with_keys, stored_payloads
from tests.integration.test_replay import HISTORIES, replayer
from tests.integration.user_backend import AUDIENCE, UserBackend, helpdesk_file, serving


def lookups(who: str, *, pause_s: float) -> Conversation:
    """Two lookups `pause_s` apart (longer than a token lives), then the answer."""
    return Conversation(
        match=f"tickets of {who}",
        turns=[
            Turn(
                tool_calls=[
                    ScriptedToolCall(name="mcp__tickets__lookup", arguments={"ticket": f"{who}-1"})
                ]
            ),
            Turn(
                delay_s=pause_s,
                tool_calls=[
                    ScriptedToolCall(name="mcp__tickets__lookup", arguments={"ticket": f"{who}-2"})
                ],
            ),
            Turn(content=f"Both tickets of {who} are open."),
        ],
    )


async def start(http: Any, workspace: Path, who: str, headers: dict[str, str]) -> str:
    created = await http.post(
        "/v1/runs",
        headers=headers,
        json={
            "agent": "helpdesk",
            "input": f"Look at the tickets of {who}.",
            "workspace": str(workspace),
        },
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def test_each_user_s_calls_carry_their_own_token_refreshed_and_a_schedule_its_owner_s(
    keel_app: LaunchKeel, workspace: Path, tmp_path: Path
) -> None:
    tenant = f"creds-{uuid.uuid4().hex[:8]}"
    alice, bob = auth_headers(tenant, "alice"), auth_headers(tenant, "bob")
    script = Script(
        turns=[Turn(content="unused")],
        conversations=[
            lookups("alice", pause_s=3.5),
            lookups("bob", pause_s=3.5),
            lookups("nightly", pause_s=0),
        ],
    )
    async with serving(UserBackend(expires_in=3)) as backend:
        helpdesk_file(tmp_path / "agents", backend.url)
        credentials = {
            backend.origin: {
                "grant": "token_exchange",
                "token_url": f"{backend.origin}/token",
                "audience": AUDIENCE,
            }
        }
        async with keel_app(
            script, agents_dir=tmp_path / "agents", user_credentials=credentials, headers=alice
        ) as http:
            runs = {
                who: await start(http, workspace, who, headers)
                for who, headers in (("alice", alice), ("bob", bob))
            }
            for who, run_id in runs.items():
                headers = alice if who == "alice" else bob
                run = await run_reaches(http, run_id, headers=headers, within=90)
                assert run["status"] == "completed", run

            for who in ("alice", "bob"):
                other = "bob" if who == "alice" else "alice"
                calls = backend.calls_of(who)
                assert [c.ticket for c in calls] == [f"{who}-1", f"{who}-2"]
                mine = backend.tokens_of(f"{tenant}/{who}")
                bearers = [(c.bearer or "").removeprefix("Bearer ") for c in calls]
                assert all(b in mine for b in bearers), (bearers, mine)
                assert not set(bearers) & backend.tokens_of(f"{tenant}/{other}")
                # The first token had expired by the second call: a fresh one was obtained.
                assert bearers[0] != bearers[1]
            exchanges = [g for g in backend.grants if g.get("grant_type", "").endswith("exchange")]
            assert len(exchanges) >= 4
            assert all(g["audience"] == AUDIENCE for g in exchanges)

            # A schedule bob owns: its run acts as bob, whoever triggers it.
            created = await http.post(
                "/v1/schedules",
                headers=bob,
                json={
                    "agent": "helpdesk",
                    "input": "Look at the tickets of nightly.",
                    "workspace": str(workspace),
                    "cron_expressions": ["0 3 1 1 *"],
                },
            )
            assert created.status_code == 201, created.text
            sid = created.json()["id"]
            try:
                fired = await http.post(f"/v1/schedules/{sid}/trigger", headers=bob)
                assert fired.status_code == 202, fired.text
                run = await run_reaches(http, fired.json()["run_id"], headers=bob, within=90)
                assert run["status"] == "completed" and run["trigger"] == "schedule", run
            finally:
                await http.delete(f"/v1/schedules/{sid}", headers=bob)
            [nightly, _] = backend.calls_of("nightly")
            assert (nightly.bearer or "").removeprefix("Bearer ") in backend.tokens_of(
                f"{tenant}/bob"
            )


async def readable_tables(database_url: str) -> str:
    """Every row of every table in the database, as text."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        tables = [
            row[0]
            for row in await (
                await conn.execute(
                    "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public'"
                )
            ).fetchall()
        ]
        parts: list[str] = []
        for table in tables:
            rows = await (await conn.execute(f"SELECT t::text FROM {table} t")).fetchall()
            parts.extend(str(r[0]) for r in rows)
    return "\n".join(parts)


async def keel_cli(*args: str, stdin: str, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "keel.api.cli.main",
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=120)
    return proc.returncode or 0, out.decode()


async def test_a_missing_credential_is_asked_for_and_the_secret_reaches_only_the_backend(
    temporal_client: Client,
    temporal_server: Any,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    database_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    tenant = f"secret-{uuid.uuid4().hex[:8]}"
    alice = auth_headers(tenant, "alice")
    secret = f"pat-{uuid.uuid4().hex}"
    llm = scripted(
        Script(turns=[Turn(content="unused")], conversations=[lookups("alice", pause_s=0)])
    )
    async with serving(UserBackend()) as backend:
        helpdesk_file(tmp_path / "agents", backend.url)
        settings = settings_for(
            llm,
            workspace,
            agents_dir=tmp_path / "agents",
            user_credentials={
                backend.origin: {"grant": "user_token", "prompt": "Your tickets token?"}
            },
        )
        async with keel_with_keys(settings, store, {"k1": new_key()}, "k1") as keel:
            http = keel.http
            run_id = await start(http, workspace, "alice", alice)
            [asked] = await pending(http, run_id, headers=alice)
            assert asked["kind"] == "secret_ref" and asked["question"] == "Your tickets token?"
            assert asked["approvers"] == ["user:alice"]

            # As text it is refused: the run holds references only.
            as_text = await http.post(
                f"/v1/runs/{run_id}/interactions/{asked['id']}",
                headers=alice,
                json={"decision": "answer", "text": secret},
            )
            assert as_text.status_code == 422 and "secret" in as_text.json()["detail"]
            # A secret too long to keep is refused without being echoed back.
            too_long = secret + "x" * MAX_SECRET_CHARS
            refused = await http.post(
                f"/v1/runs/{run_id}/interactions/{asked['id']}",
                headers=alice,
                json={"decision": "answer", "secret": too_long},
            )
            assert refused.status_code == 422 and secret not in refused.text, refused.text
            # Bob may not give alice's credential.
            as_bob = await http.post(
                f"/v1/runs/{run_id}/interactions/{asked['id']}",
                headers=auth_headers(tenant, "bob"),
                json={"decision": "answer", "secret": secret},
            )
            assert as_bob.status_code == 403, as_bob.text

            env = clean_env(KEEL_API_URL=keel.url, KEEL_TOKEN=token_for(tenant, "alice"))
            code, out = await keel_cli("secret", run_id, asked["id"], stdin=secret + "\n", env=env)
            assert code == 0, out
            assert "accepted" in out and secret not in out
            run = await run_reaches(http, run_id, headers=alice, within=60)
            assert run["status"] == "completed", run

            # The backend got the very value, as alice's bearer, on each call.
            assert [c.bearer for c in backend.calls_of("alice")] == [f"Bearer {secret}"] * 2
            # Once-only: the interaction is answered with a reference, and closed.
            again = await http.post(
                f"/v1/runs/{run_id}/interactions/{asked['id']}",
                headers=alice,
                json={"decision": "answer", "secret": "another"},
            )
            assert again.status_code == 409, again.text
            shown = (
                await http.get(f"/v1/runs/{run_id}/interactions/{asked['id']}", headers=alice)
            ).json()
            assert shown["status"] == "answered" and shown["answer"].startswith("secret:")

            events = await http.get(f"/v1/runs/{run_id}/events/stream", headers=alice)
            audit = await http.get(
                "/v1/admin/audit", headers=auth_headers(tenant, "root", "keel:admin")
            )
            assert audit.status_code == 200, audit.text
            plain = await connect(temporal_server.address)
            history = await plain.get_workflow_handle(run_id).fetch_history()
            stored = stored_payloads(history)
            codec = payload_codec(keel.settings)
            assert codec is not None
            opened = await codec.decode(stored)
            with_codec = "\n".join(p.data.decode(errors="replace") for p in opened)
            without_codec = history.to_json() + "".join(
                p.data.decode(errors="replace") for p in stored
            )
            assert "secret:" in with_codec  # the codec shows the history: the reference is there

        tables = await readable_tables(database_url)
        assert run_id in tables and "secret_ref" in tables
        for where, text in {
            "Postgres": tables,
            "SSE events": events.text,
            "audit": audit.text,
            "history with the codec": with_codec,
            "history without the codec": without_codec,
            "logs": "\n".join(r.getMessage() for r in caplog.records),
        }.items():
            assert secret not in text, f"the secret is in the {where}"


async def test_a_secret_request_expires_like_an_approval_and_an_answered_one_replays(
    keel_app: LaunchKeel, temporal_client: Client, workspace: Path, tmp_path: Path
) -> None:
    tenant = f"expiry-{uuid.uuid4().hex[:8]}"
    alice = auth_headers(tenant, "alice")
    script = Script(
        turns=[Turn(content="unused")],
        conversations=[
            lookups("alice", pause_s=0),
            Conversation(
                match="tickets of late",
                turns=[
                    Turn(
                        tool_calls=[
                            ScriptedToolCall(
                                name="mcp__tickets__lookup", arguments={"ticket": "late-1"}
                            )
                        ]
                    ),
                    Turn(content="{tool_results}"),
                ],
            ),
        ],
    )
    async with serving(UserBackend()) as backend:
        helpdesk_file(tmp_path / "agents", backend.url)
        credentials = {backend.origin: {"grant": "user_token"}}
        async with keel_app(
            script, agents_dir=tmp_path / "agents", user_credentials=credentials, headers=alice
        ) as http:
            # Unanswered, it expires: the server is left out, the run goes on and ends.
            created = await http.post(
                "/v1/runs",
                json={
                    "agent": "helpdesk",
                    "input": "Look at the tickets of late.",
                    "workspace": str(workspace),
                    "approval_expires_after_s": 1,
                },
            )
            assert created.status_code == 201, created.text
            late = created.json()["id"]
            run = await run_reaches(http, late, within=60)
            assert run["status"] == "completed", run
            [expired] = (await http.get(f"/v1/runs/{late}/interactions")).json()
            assert expired["kind"] == "secret_ref" and expired["status"] == "expired"
            assert backend.calls_of("late") == []
            answered = await http.post(
                f"/v1/runs/{late}/interactions/{expired['id']}",
                json={"decision": "answer", "secret": "too-late"},
            )
            assert answered.status_code == 409, answered.text

            # Answered through the API: its history replays, and is kept for test_replay.
            run_id = await start(http, workspace, "alice", alice)
            [asked] = await pending(http, run_id, headers=alice)
            given = await http.post(
                f"/v1/runs/{run_id}/interactions/{asked['id']}",
                json={"decision": "answer", "secret": "pat-for-the-history"},
            )
            assert given.status_code == 200, given.text
            assert (await run_reaches(http, run_id, within=60))["status"] == "completed"
            assert [c.bearer for c in backend.calls_of("alice")] == [
                "Bearer pat-for-the-history"
            ] * 2
    history = await temporal_client.get_workflow_handle(run_id).fetch_history()
    assert (await replayer().replay_workflow(history)).replay_failure is None
    assert "pat-for-the-history" not in history.to_json()
    if os.environ.get("KEEL_RECORD_HISTORY"):
        # KEEL_RECORD_HISTORY=1: keep this run's history for test_replay.
        target = HISTORIES / "agent_run_secret_ref.json"
        target.write_text(json.dumps(history.to_json_dict(), indent=1))
