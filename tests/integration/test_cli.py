"""The `keel` command as a user runs it: demo, review, runs list/show, and the embedded stack."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from keel.api.cli.local_stack import local_stack
from keel.api.identity.config import cli_token
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.temporal_client import connect
from tests.conftest import JWT_SECRET, auth_headers, token_for
from tests.integration.keel_http import LaunchKeel, base_url, settings_of

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
STACK_VARS = ("TEMPORAL_ADDRESS", "DATABASE_URL", "KEEL_API_URL", "OPENAI_BASE_URL")


async def keel(*args: str, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "keel.api.cli.main",
        *args,
        # Wide: a table of this process's database's runs (other tests' too, with long ids)
        # keeps every column readable; a test of narrow terminals sets its own.
        env={"COLUMNS": "200", **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=240)
    return proc.returncode or 0, out.decode()


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in STACK_VARS}
    # An embedded stack on a port of its own: the default one may be another test
    # process's stack, which `keel` would use.
    env["KEEL_API_PORT"] = str(free_port())
    env.update(extra)
    return env


@pytest.mark.slow  # starts `keel` processes, as the other tests of the slow lane do
async def test_demo_runs_offline_and_reports_the_files_it_read(tmp_path: Path) -> None:
    env = clean_env(KEEL_DATA_DIR=str(tmp_path / "data"))
    env.pop("XDG_RUNTIME_DIR", None)  # as in a container: the embedded Postgres stays quiet
    code, out = await keel("demo", env=env)
    assert code == 0, out
    assert "Warning" not in out, out
    assert "completed · stop reason final_answer" in out
    read = set(re.findall(r'→ read_file .*?"path": ?"([^"]+)"', out))
    assert read == {"inventory/store.py", "inventory/pricing.py", "tests/test_pricing.py"}
    saved = re.search(r"Report saved to (\S+)", out)
    assert saved is not None
    report = Path(saved.group(1)).read_text()
    files_section = report.split("## Files reviewed", 1)[1].split("##", 1)[0]
    assert set(re.findall(r"^- (\S+)$", files_section, re.MULTILINE)) == read


@pytest.mark.slow  # starts `keel` processes, as the other tests of the slow lane do
async def test_review_runs_list_and_show_on_a_running_stack(
    workspace: Path, tmp_path: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"})
                    ]
                ),
                Turn(content="# Review\n\n## Files reviewed\n{files_read}"),
            ]
        )
    )
    out_file = tmp_path / "report.md"
    async with keel_app(llm) as http:
        url = base_url(http)
        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        code, out = await keel("review", str(workspace), "--out", str(out_file), env=env)
        assert code == 0, out
        assert "→ read_file" in out and "- pkg/core.py" in out_file.read_text()
        run_id = re.search(r"Run (run-\w+)", out)
        assert run_id is not None

        code, listing = await keel("runs", "list", env=env)
        assert code == 0 and run_id.group(1) in listing
        # A pipe or a narrow terminal shortens other columns, never the id a user copies.
        code, listing = await keel("runs", "list", env={**env, "COLUMNS": "60"})
        assert code == 0 and run_id.group(1) in listing, listing
        code, shown = await keel("runs", "show", run_id.group(1), env=env)
        assert code == 0 and f"Run {run_id.group(1)}  review  completed" in shown, shown

        code, missing = await keel("review", str(tmp_path / "nope"), env=env)
        # However long the path, and wherever the terminal wraps it.
        assert code == 1 and "is not a directory" in " ".join(missing.split()), missing

        # A schedule's row says whose it is: its runs carry that person's roles.
        schedule_id = f"nightly-{uuid.uuid4().hex[:6]}"
        create = ("schedules", "create", "review", "Review it.", "--every", "1d", "--paused")
        code, made = await keel(
            *create, "--workspace", str(workspace), "--id", schedule_id, env=env
        )
        assert code == 0, made
        code, schedules = await keel("schedules", "list", env={**env, "COLUMNS": "200"})
        [row] = [line for line in schedules.splitlines() if schedule_id in line]
        assert code == 0 and " review " in row and " local " in row, schedules
        code, _ = await keel("schedules", "delete", schedule_id, "--yes", env=env)
        assert code == 0


@pytest.mark.slow  # starts `keel` processes, as the other tests of the slow lane do
async def test_embedded_stack_finds_its_runs_again_after_a_restart(
    workspace: Path, tmp_path: Path, scripted: StartLLM
) -> None:
    llm = scripted(Script(turns=[Turn(content="Nothing to see.")]))
    settings = settings_from(
        data_dir=tmp_path / "keel-data",
        workspace_root=workspace,
        openai_base_url=llm.base_url,
        model="scripted",
        api_port=free_port(),
        temporal_port=free_port(),
        temporal_ui_port=free_port(),
    )
    async with local_stack(settings, reuse_running=False, ui=False) as info:
        assert info.started_here
        headers = {"authorization": f"Bearer {cli_token(info.settings)}"}
        async with httpx.AsyncClient(base_url=info.api_url, headers=headers) as http:
            created = await http.post(
                "/v1/runs", json={"agent": "explore", "input": "x", "workspace": str(workspace)}
            )
            run_id = created.json()["id"]
            for _ in range(200):
                if (await http.get(f"/v1/runs/{run_id}")).json()["status"] == "completed":
                    break
                await asyncio.sleep(0.05)
    assert (tmp_path / "keel-data" / "temporal.sqlite").exists()

    async with local_stack(settings, reuse_running=False, ui=False) as info:
        headers = {"authorization": f"Bearer {cli_token(info.settings)}"}
        async with httpx.AsyncClient(base_url=info.api_url, headers=headers) as http:
            run = (await http.get(f"/v1/runs/{run_id}")).json()
        assert run["status"] == "completed" and run["report"] == "Nothing to see."
        client = await connect(str(info.settings.temporal_address))
        description = await client.get_workflow_handle(run_id).describe()
        assert description.status is not None and description.status.name == "COMPLETED"


@pytest.mark.slow  # starts `keel` processes, as the other tests of the slow lane do
async def test_a_run_that_asks_is_approved_from_another_terminal(
    workspace: Path, tmp_path: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(
                            name="write_file",
                            arguments={"path": "CHANGELOG.md", "content": "## 1.0\n"},
                        )
                    ]
                ),
                Turn(content="Added the changelog."),
            ]
        )
    )
    async with keel_app(llm) as http:
        env = clean_env(
            KEEL_API_URL=base_url(http),
            KEEL_DATA_DIR=str(tmp_path / "cli"),
            KEEL_JWT_SECRET=JWT_SECRET,
            COLUMNS="200",
        )
        run = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "keel.api.cli.main",
            "run",
            "build",
            "Add a changelog.",
            "--workspace",
            str(workspace),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert run.stdout is not None
        seen: list[str] = []
        waiting = None
        while waiting is None:
            line = (await asyncio.wait_for(run.stdout.readline(), timeout=60)).decode()
            assert line, "".join(seen)
            seen.append(line)
            waiting = re.search(r"`keel approve (\S+) (\S+)`", line)
        run_id, interaction_id = waiting.group(1), waiting.group(2)

        code, out = await keel("approve", run_id, interaction_id, env=env)
        assert code == 0 and "accepted" in out, out
        # Approving again is a safe retry; deciding otherwise is refused.
        code, again = await keel("approve", run_id, interaction_id, env=env)
        assert code == 0 and "accepted" in again, again
        code, other = await keel("reject", run_id, interaction_id, env=env)
        # A refusal of what the user asked is its sentence, without the HTTP status.
        assert code == 1 and "is already" in other and "409" not in other, other

        rest, _ = await asyncio.wait_for(run.communicate(), timeout=60)
        assert run.returncode == 0, "".join(seen) + rest.decode()
        assert "Added the changelog." in rest.decode()
    assert (workspace / "CHANGELOG.md").read_text() == "## 1.0\n"


@pytest.mark.slow  # starts `keel` processes, as the other tests of the slow lane do
async def test_coordinate_on_a_running_keel_finds_its_temporal_without_temporal_address(
    workspace: Path, tmp_path: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(Script(turns=[Turn(content="No retry logic in pkg/core.py.")]))
    async with keel_app(llm) as http:
        url = base_url(http)
        # As README has it after `keel dev`: no TEMPORAL_ADDRESS in this shell.
        env = clean_env(
            KEEL_API_URL=url,
            KEEL_DATA_DIR=str(tmp_path / "cli"),
            KEEL_JWT_SECRET=JWT_SECRET,
            KEEL_TASK_QUEUE=settings_of(http).task_queue,
        )
        # Through the API (`POST /v1/coordinations`), so the same --id again is the same one.
        ask = ("coordinate", "Review the retry logic", "--agent", f"{url}/a2a/review",
               "--timeout", "120", "--id", f"cli-{uuid.uuid4().hex[:8]}")  # fmt: skip
        code, out = await keel(*ask, env=env)
        assert code == 0, out
        code, again = await keel(*ask, env=env)
    assert code == 0, again
    assert "No retry logic in pkg/core.py." in out and "Report saved to" in out
    assert again.count("No retry logic in pkg/core.py.") == 1
    assert llm.total_requests == 1  # the second command started no second run


@pytest.mark.slow  # starts `keel` processes, as the other tests of the slow lane do
async def test_coordinations_are_listed_and_a_running_one_cancelled_from_the_cli(
    workspace: Path, tmp_path: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    llm = scripted(Script(turns=[Turn(content="The review, at last.")]))
    tenant = f"cli-{uuid.uuid4().hex[:8]}"
    chosen = f"cli-{uuid.uuid4().hex[:8]}"
    llm.hold()
    try:
        async with keel_app(llm, headers=auth_headers(tenant, "alice")) as alice:
            url = base_url(alice)
            env = clean_env(
                KEEL_API_URL=url,
                KEEL_DATA_DIR=str(tmp_path / "cli"),
                KEEL_TOKEN=token_for(tenant, "alice"),
            )
            body = {"task": "Review it", "agents": [{"url": f"{url}/a2a/review", "name": "R"}]}
            started = await alice.post("/v1/coordinations", json=body | {"id": chosen})
            assert started.status_code == 201, started.text
            listing = ""
            for _ in range(50):  # Temporal's list is a moment behind
                code, listing = await keel("coordinations", "list", env=env)
                if chosen in listing:
                    break
            [row] = [line for line in listing.splitlines() if chosen in line]
            assert code == 0 and " running " in row and " R " in row, listing

            code, out = await keel("coordinations", "cancel", chosen, env=env)
            assert code == 0 and (
                f"{chosen}: cancelling" in out or f"{chosen}: cancelled" in out
            ), out
            for _ in range(100):
                if (await alice.get(f"/v1/coordinations/{chosen}")).json()["status"] == "cancelled":
                    break
                await asyncio.sleep(0.1)
            code, out = await keel("coordinations", "cancel", chosen, env=env)
            assert code == 1 and "already ended (cancelled)" in out and "409" not in out, out
            code, out = await keel("coordinations", "list", "--cursor", "nope", env=env)
            assert code == 1 and "--cursor: Malformed cursor" in out, out
            llm.release()
    finally:
        llm.release()
