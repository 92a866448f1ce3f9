"""`keel dev` on a machine with no model configured, as a newcomer starts it.

A real `keel dev` process with none of the model variables set: it starts the scripted
model, says so, and `keel review` and an approved `keel run build` complete through the
CLI with no network. The commands run are the README's first screen (checked there
too: `tests/unit/test_doc_commands.py`). A model that is configured without its key is
refused before anything starts.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from keel.worker.dev_stack import free_port

# What would choose a model, or a Keel other than the one each test starts.
UNSET = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "KEEL_MODEL",
    "TEMPORAL_ADDRESS",
    "DATABASE_URL",
    "KEEL_API_URL",
    "KEEL_API_PORT",
    "KEEL_WORKSPACE_ROOT",
)
START_TIMEOUT_S = 180
PROJECT = "path/to/your/project"  # as the README writes it


def newcomer_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(COLUMNS="200", KEEL_DATA_DIR=str(data_dir), **extra)
    env.pop("XDG_RUNTIME_DIR", None)  # as in a container: the embedded Postgres stays quiet
    return env


async def keel(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "keel.api.cli.main",
        *args,
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=120)
    return proc.returncode or 0, out.decode()


def project(root: Path) -> Path:
    """A small project of the user's, with one known problem in it."""
    path = root / PROJECT
    (path / "billing").mkdir(parents=True)
    (path / "README.md").write_text("# Billing\n\nTotals for invoices.\n")
    (path / "billing" / "totals.py").write_text(
        "def total(prices):\n"
        "    return round(sum(prices), 2)  # BUG: float money; sum Decimals instead\n"
    )
    return path


async def _read_until(stream: asyncio.StreamReader, pattern: str, seen: list[str]) -> re.Match[str]:
    while True:
        line = (await stream.readline()).decode()
        assert line, "the process ended early:\n" + "".join(seen)
        seen.append(line)
        found = re.search(pattern, line)
        if found is not None:
            return found


@pytest.fixture
async def keel_dev(tmp_path: Path) -> AsyncIterator[tuple[dict[str, str], list[str]]]:
    """`keel dev` started in `tmp_path` with no model variables; its env for other
    commands, and the lines it printed up to "Ready"."""
    api_port = free_port()
    env = newcomer_env(
        tmp_path / "keel-data",
        KEEL_API_PORT=str(api_port),
        KEEL_TEMPORAL_PORT=str(free_port()),
        KEEL_TEMPORAL_UI_PORT=str(free_port()),
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "keel.api.cli.main",
        "dev",
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    banner: list[str] = []
    try:
        await asyncio.wait_for(_read_until(proc.stdout, r"^Ready\.", banner), START_TIMEOUT_S)
        yield {**env, "KEEL_API_URL": f"http://127.0.0.1:{api_port}"}, banner
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(proc.communicate(), timeout=60)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def test_keel_dev_with_no_model_reviews_and_asks_offline(
    keel_dev: tuple[dict[str, str], list[str]], tmp_path: Path
) -> None:
    env, banner = keel_dev
    shown = "".join(banner)
    model = next(line for line in banner if "Model" in line)
    assert "scripted" in model and "offline" in model, shown
    assert "OPENAI_API_KEY" in shown and "ANTHROPIC_API_KEY" in shown, shown
    code_dir = project(tmp_path)

    code, out = await keel("review", PROJECT, env=env, cwd=tmp_path)
    assert code == 0, out
    assert "completed · stop reason final_answer" in out, out
    assert "billing/totals.py:2: float money; sum Decimals instead" in out, out
    assert "Started an embedded stack" not in out  # it used the running keel dev

    # The README's approval: the agent's write waits for a person.
    run = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "keel.api.cli.main",
        "run",
        "build",
        "Review the code and write the report to REVIEW.md",
        "--workspace",
        PROJECT,
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert run.stdout is not None
    seen: list[str] = []
    waiting = await asyncio.wait_for(
        _read_until(run.stdout, r"`keel approve (\S+) (\S+)`", seen), timeout=120
    )
    run_id, interaction_id = waiting[1], waiting[2]
    assert not (code_dir / "REVIEW.md").exists()

    code, listed = await keel("interactions", run_id, env=env, cwd=tmp_path)
    assert code == 0 and "write_file" in listed and "REVIEW.md" in listed, listed
    code, approved = await keel("approve", run_id, interaction_id, env=env, cwd=tmp_path)
    assert code == 0 and "accepted" in approved, approved

    rest, _ = await asyncio.wait_for(run.communicate(), timeout=120)
    assert run.returncode == 0, "".join(seen) + rest.decode()
    assert "The report is also in REVIEW.md." in rest.decode()
    assert "billing/totals.py:2: float money" in (code_dir / "REVIEW.md").read_text()


@pytest.mark.parametrize(
    ("variables", "args", "sentence"),
    [
        (
            {"KEEL_MODEL": "gpt-4.1"},
            (),
            "The model gpt-4.1 goes to https://api.openai.com/v1 and OPENAI_API_KEY is not set",
        ),
        ({}, ("--model", "gpt-4.1"), "OPENAI_API_KEY is not set"),
        (
            {"KEEL_MODEL": "claude-sonnet-4-5", "OPENAI_API_KEY": "sk-test"},
            (),
            "The model claude-sonnet-4-5 is Anthropic's and ANTHROPIC_API_KEY is not set",
        ),
    ],
)
async def test_keel_dev_refuses_a_configured_model_without_its_key_at_start(
    tmp_path: Path, variables: dict[str, str], args: tuple[str, ...], sentence: str
) -> None:
    env = newcomer_env(tmp_path / "keel-data", KEEL_API_PORT=str(free_port()), **variables)
    started = asyncio.get_running_loop().time()
    code, out = await keel("dev", *args, env=env, cwd=tmp_path)
    assert code == 1, out
    flat = " ".join(out.split())
    assert sentence in flat and "keel dev --model scripted" in flat, out
    assert asyncio.get_running_loop().time() - started < 30
    assert not (tmp_path / "keel-data" / "postgres").exists()  # refused before starting
