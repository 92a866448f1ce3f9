"""`keel review` prints a report as a person reads it: file names literally, findings as a
table, nothing the model wrote read as console markup."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.api.cli.local_stack import serve_api
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from tests.conftest import JWT_SECRET, in_process_worker
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
    temporal_client: Client,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
    settings_for: Callable[..., Settings],
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/__init__.py"})
                    ]
                ),
                Turn(content=REPORT),
            ]
        )
    )
    settings = settings_for(llm, workspace, api_port=free_port())
    async with in_process_worker(temporal_client, store, settings), serve_api(settings) as url:
        env = clean_env(
            KEEL_API_URL=url, KEEL_DATA_DIR=str(tmp_path / "cli"), KEEL_JWT_SECRET=JWT_SECRET
        )
        code, out = await keel("review", str(workspace), env={**env, "COLUMNS": "160"})
    assert code == 0, out
    assert "pkg/__init__.py; see also __init__.py and CODE_OF_CONDUCT.md." in out, out
    assert not re.search(r"(?<!_)init\.py", out), out  # never `init.py` for `__init__.py`
    row = next(line for line in out.splitlines() if "pkg/__init__.py:1" in line)
    assert "high" in row and "[bold red]markup[/] stays text" in row, out
    assert '"severity"' not in out and "```" not in out  # a table, not the JSON
