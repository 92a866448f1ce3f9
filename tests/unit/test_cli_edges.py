"""The CLI at its edges: ids stay whole in narrow tables, bad values are sentences."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from keel.api.cli.evals import where_recorded
from keel.api.cli.main import app
from keel.api.cli.request_body import ignored_model
from keel.api.cli.tables import id_column
from keel.api.core.plain_errors import BLANK_TASK
from keel.api.core.schemas.runs import RunCreate
from keel.worker.config.settings import Settings

runner = CliRunner()
IDS = ["run-6d6faededf1745b6-task-4-2", "sch-05bc4e775c75"]


@pytest.mark.parametrize("width", [60, 80])
def test_an_id_column_is_never_cut_short(width: int) -> None:
    table = Table(id_column("id", IDS), "agent", "status", "stop reason", "steps", "created")
    for run_id in IDS:
        table.add_row(run_id, "explore", "completed", "final_answer", "13", "2026-12-01 16:19")
    console = Console(width=width, record=True)
    console.print(table)
    text = console.export_text()
    for run_id in IDS:
        assert run_id in text, text


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # Each names what the user typed: the argument or the flag, not the field.
        (["run", "review", ""], f"error: PROMPT: {BLANK_TASK}"),
        (["run", "review", "   "], f"error: PROMPT: {BLANK_TASK}"),
        (["run", "review", "x", "--model", "m" * 201], "error: --model: Too long: at most 200"),
        (["run", "", "x"], "error: AGENT: Must not be empty."),
        (["review", ".", "--prompt", ""], f"error: --prompt: {BLANK_TASK}"),
        (["review", ".", "--prompt", " \n\t"], f"error: --prompt: {BLANK_TASK}"),
        (["coordinate", "", "--agent", "http://a"], f"error: TASK: {BLANK_TASK}"),
        (["coordinate", "  ", "--agent", "http://a"], f"error: TASK: {BLANK_TASK}"),
        (
            ["coordinate", "Review", "--agent", "ftp://a"],
            "error: --agent: Must be an http:// or https:// URL without spaces, not 'ftp://a'.",
        ),
        (
            ["coordinate", "Review", "--agent", "http://a", "--id", "a b"],
            "error: --id: Must be an id of up to 128 letters, digits and _ . : -, starting "
            "with a letter or digit, not 'a b'.",
        ),
        (
            ["schedules", "create", "review", "Review.", "--every", "0", "--workspace", "."],
            "error: --every: Must be at least 1, not 0.",
        ),
    ],
)
def test_a_bad_value_is_a_sentence_not_a_traceback(
    args: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert said in " ".join(result.output.split()), result.output
    assert isinstance(result.exception, SystemExit), result.exception  # a clean exit, no error
    assert "should match" not in result.output and "Input should" not in result.output


def test_a_model_from_this_shell_that_a_running_keel_ignored_is_noticed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = RunCreate(agent="notes", input="Count.", workspace=".")
    monkeypatch.delenv("KEEL_MODEL", raising=False)
    assert not ignored_model(Settings(), body, "gpt-4.1-mini")
    monkeypatch.setenv("KEEL_MODEL", "example/counter")
    assert ignored_model(Settings(), body, "scripted-reviewer")
    assert not ignored_model(Settings(), body, "example/counter")
    chosen = body.model_copy(update={"model": "other"})
    assert not ignored_model(Settings(), chosen, "other")


def test_keel_eval_says_which_console_lists_its_results(tmp_path: Path) -> None:
    embedded = Settings().model_copy(
        update={"data_dir": tmp_path / "evals", "database_url": "host=/tmp/pg dbname=keel"}
    )
    said = where_recorded(embedded)
    assert f"KEEL_DATA_DIR={tmp_path / 'evals'} keel dev" in said
    shared = embedded.model_copy(update={"database_url": "postgresql://db.example/keel"})
    assert "DATABASE_URL" in where_recorded(shared)


def test_the_scripted_server_says_it_plays_a_policy_not_zero_turns(tmp_path: Path) -> None:
    script = tmp_path / "reviewer.yaml"
    script.write_text("name: scripted-reviewer\npolicy: reviewer\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "keel.worker.scripted.llm", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert first.startswith("Serving script 'scripted-reviewer' (policy reviewer) at http://")


@pytest.mark.parametrize("key_id", ["", "k" * 65, "tab\there"])
def test_keys_new_refuses_an_id_that_keel_would_refuse_at_start(key_id: str) -> None:
    result = runner.invoke(app, ["keys", "new", "--id", key_id])
    assert result.exit_code == 1
    assert "must be 1 to 64 printable characters" in result.output
    assert isinstance(result.exception, SystemExit)
