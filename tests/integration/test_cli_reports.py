"""`keel review` prints a report as a person reads it: file names literally, findings as a
table, nothing the model wrote read as console markup."""

from __future__ import annotations

import json
import re
from pathlib import Path

from keel.worker.scripted.llm import Script, ScriptedToolCall, Turn
from tests.conftest import JWT_SECRET
from tests.integration.conftest import LaunchKeel
from tests.integration.keel_http import base_url
from tests.integration.test_cli import clean_env, keel

FINDING = {
    "file": "pkg/__init__.py",
    "line": 1,
    "severity": "high",
    "title": "[bold red]markup[/] stays text",
    "detail": "See CODE_OF_CONDUCT.md.",
}
REPORT = (
    "## Summary\nThe package starts in pkg/__init__.py; see also __init__.py and "
    "CODE_OF_CONDUCT.md.\n\n```findings\n" + json.dumps([FINDING]) + "\n```\n"
)


async def test_keel_review_prints_file_names_literally_and_findings_as_a_table(
    workspace: Path, tmp_path: Path, keel_app: LaunchKeel
) -> None:
    script = Script(
        turns=[
            Turn(
                tool_calls=[
                    ScriptedToolCall(name="read_file", arguments={"path": "pkg/__init__.py"})
                ]
            ),
            Turn(content=REPORT),
        ]
    )
    async with keel_app(script) as http:
        env = clean_env(
            KEEL_API_URL=base_url(http),
            KEEL_DATA_DIR=str(tmp_path / "cli"),
            KEEL_JWT_SECRET=JWT_SECRET,
        )
        code, out = await keel("review", str(workspace), env={**env, "COLUMNS": "160"})
    assert code == 0, out
    assert "pkg/__init__.py; see also __init__.py and CODE_OF_CONDUCT.md." in out, out
    assert not re.search(r"(?<!_)init\.py", out), out  # never `init.py` for `__init__.py`
    row = next(line for line in out.splitlines() if "pkg/__init__.py:1" in line)
    assert "high" in row and "[bold red]markup[/] stays text" in row, out
    assert '"severity"' not in out and "```" not in out  # a table, not the JSON
