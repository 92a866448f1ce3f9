"""Without bwrap and Chromium, their tests skip with a one-line reason each, and the run
ends with a "not run here" summary saying how many and what to install.

A real pytest run of this suite in a subprocess, whose PATH holds neither program."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MISSING

ROOT = Path(__file__).resolve().parents[2]
A_BWRAP_TEST = "tests/unit/test_bash_sandbox.py::test_writes_outside_the_workspace_fail"
A_BROWSER_TEST = (
    "tests/browser/test_console_refusals.py"
    "::test_a_blank_task_from_the_start_form_reads_as_the_sentence_alone"
)


@pytest.mark.slow  # runs pytest itself in a child process
def test_a_run_without_bwrap_or_chromium_skips_their_tests_and_says_how_to_enable_them(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("KEEL_CHROMIUM", "PYTEST_ADDOPTS")}
    env["PATH"] = str(empty)  # neither `bwrap` nor `chromium` can be found
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", A_BWRAP_TEST,
         A_BROWSER_TEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    bwrap_reason, bwrap_enable = MISSING["needs_bwrap"][1:]
    chromium_reason, chromium_enable = MISSING["browser"][1:]
    # One line per skipped test, with its reason ...
    assert f"SKIPPED [1] {A_BWRAP_TEST.split('::')[0]}" in out, out
    assert f"{bwrap_reason}" in out and f"{chromium_reason}" in out, out
    assert "2 skipped" in out, out
    # ... and the summary: how many, why, and what to install.
    summary = out.split("not run here", 1)[1]
    assert f"1 skipped, {bwrap_reason}; to run them: {bwrap_enable}" in summary, out
    assert f"1 skipped, {chromium_reason}; to run them: {chromium_enable}" in summary, out
    assert "slow lanes" in summary, out
