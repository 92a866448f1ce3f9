"""`keel dev` on a machine with no model configured, as a newcomer starts it.

A real `keel dev` process with none of the model variables set: it starts the scripted
model and says so, and the README's first-hour commands (a review of your own code,
the console link, a run that waits for approval, approved and rejected) run as the
README writes them, read from its shell blocks, with no network. A model that is
configured without its key is refused before anything starts.
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
from tests.doc_commands import ROOT, keel_commands

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
# The README's sections a newcomer follows in their first hour.
FIRST_HOUR = ("A first review", "Watching it in the console", "An approval")


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
    # A command that starts its own stack brings Temporal and Postgres up first.
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=240)
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


async def _start_waiting(
    args: tuple[str, ...], env: dict[str, str], cwd: Path
) -> tuple[asyncio.subprocess.Process, str, str, list[str]]:
    """`keel ARGS` started, read until it waits on a person: the process, run, interaction."""
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
    assert proc.stdout is not None
    seen: list[str] = []
    waiting = await asyncio.wait_for(
        _read_until(proc.stdout, r"`keel approve (\S+) (\S+)`", seen), timeout=120
    )
    return proc, waiting[1], waiting[2], seen


async def _finish(proc: asyncio.subprocess.Process, seen: list[str]) -> str:
    rest, _ = await asyncio.wait_for(proc.communicate(), timeout=120)
    out = "".join(seen) + rest.decode()
    assert proc.returncode == 0, out
    return out


def readme_first_hour() -> list[tuple[str, ...]]:
    """The `keel` commands of the README's first review, console and approval, in order."""
    return [
        command.args
        for command in keel_commands(ROOT / "README.md")
        if command.section.startswith(FIRST_HOUR)
    ]


@pytest.mark.timeout(600)  # a whole keel dev comes up first; slow on a loaded machine
async def test_the_readme_first_hour_runs_offline_as_written(
    keel_dev: tuple[dict[str, str], list[str]], tmp_path: Path
) -> None:
    env, banner = keel_dev
    shown = "".join(banner)
    model = next(line for line in banner if "Model" in line)
    assert "scripted" in model and "offline" in model, shown
    assert "OPENAI_API_KEY" in shown and "ANTHROPIC_API_KEY" in shown, shown
    code_dir = project(tmp_path)

    commands = readme_first_hour()
    assert commands[0] == ("dev",), commands  # what the fixture started, as written
    names = {args[0] for args in commands}
    assert {"review", "console", "run", "interactions", "approve", "reject"} <= names, commands
    ids: dict[str, str] = {}
    decided: list[str] = []
    for args in commands[1:]:
        if args[0] == "run" or (args[0] == "reject" and "approve" in decided):
            # A run that waits on a person; the README's reject answers a run of its own.
            run = args if args[0] == "run" else next(c for c in commands if c[0] == "run")
            assert not (code_dir / "REVIEW.md").exists()
            proc, run_id, interaction_id, seen = await _start_waiting(run, env, tmp_path)
            ids = {"RUN_ID": run_id, "INTERACTION_ID": interaction_id}
            if args[0] == "run":
                continue
        code, out = await keel(*(ids.get(a, a) for a in args), env=env, cwd=tmp_path)
        assert code == 0, f"keel {' '.join(args)}:\n{out}"
        if args[0] == "review":
            assert out.rstrip().splitlines()[-1].startswith("completed"), out
            assert "stop reason final_answer" in out, out
            assert "billing/totals.py:2" in out and "float money; sum Decimals instead" in out
            assert "Started an embedded stack" not in out  # it used the running keel dev
            found = re.search(r"Run (run-\w+)", out)
            assert found is not None, out
            ids = {"RUN_ID": found[1]}
        elif args[0] == "runs":
            assert ids["RUN_ID"] in out, out
        elif args[0] == "console":
            assert "/console/#signin=" in out, out
        elif args[0] == "interactions":
            assert "write_file" in out and "REVIEW.md" in out, out
        elif args[0] in ("approve", "reject"):
            decided.append(args[0])
            assert "accepted" in out, out
            answer = await _finish(proc, seen)
            if args[0] == "approve":
                assert "The report is also in REVIEW.md." in answer, answer
                review = (code_dir / "REVIEW.md").read_text()
                assert "billing/totals.py:2: float money" in review
                (code_dir / "REVIEW.md").unlink()
            else:
                assert "The report is not in REVIEW.md" in answer, answer
                assert not (code_dir / "REVIEW.md").exists()
    assert decided == ["approve", "reject"], decided


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
    # Refused before anything starts (no Postgres below), so well within what starting
    # the embedded stack takes; loose, as a loaded machine is slow to start Python too.
    assert asyncio.get_running_loop().time() - started < 120
    assert not (tmp_path / "keel-data" / "postgres").exists()  # refused before starting


@pytest.mark.timeout(600)
@pytest.mark.slow  # starts `keel` processes, as the other tests of the slow lane do
async def test_keel_review_with_no_keel_running_starts_one_offline(tmp_path: Path) -> None:
    code_dir = project(tmp_path)
    env = newcomer_env(
        tmp_path / "keel-data",
        KEEL_API_PORT=str(free_port()),
        KEEL_TEMPORAL_PORT=str(free_port()),
        KEEL_TEMPORAL_UI_PORT=str(free_port()),
    )
    code, out = await keel("review", str(code_dir), env=env, cwd=tmp_path)
    assert code == 0, out
    assert "Started an embedded stack" in out and "Model: scripted" in out, out
    assert "offline" in out and "billing/totals.py:2" in out, out
