"""Files a part left unread are handed out again: the later rounds of a coverage plan.

The models here are scripted turn by turn, one conversation per part (matched by the
part's label in the prompt Keel writes), so each test decides exactly which files a
part reads before it answers, or that it fails. The workspace is the small project of
the `workspace` fixture: `README.md`, `pkg/__init__.py` and `pkg/core.py`, one part a
round.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from temporalio.client import Client

from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Conversation, Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.workflows.run.coverage_plan import COVERAGE_SECTION_HEADING
from keel.workflows.run.models import RunResult
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run

HISTORIES = Path(__file__).parent.parent / "histories"
StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
FILES = ["README.md", "pkg/__init__.py", "pkg/core.py"]


def read(path: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="read_file", arguments={"path": path})


def part(label: str, reads: list[str]) -> Conversation:
    """A part that reads `reads` (whatever Keel handed it) and answers."""
    turns = [Turn(tool_calls=[read(p) for p in reads])] if reads else []
    return Conversation(
        match=f"Review part {label} of",
        turns=[*turns, Turn(content=f"## Files read\n{chr(10).join(f'- {p}' for p in reads)}")],
    )


def failing_part(label: str) -> Conversation:
    """A part whose every model call is refused (HTTP 400: no retry helps), so it fails."""
    refused = Turn(content="never sent", fail_status=400, fail_times=100)
    return Conversation(match=f"Review part {label} of", turns=[refused])


def reviewed(section: str) -> dict[str, str]:
    return dict(re.findall(r"(?m)^- `([^`]+)` \(read by `([^`]+)`\)$", section))


def not_covered(section: str) -> dict[str, str]:
    tail = section.split("### Not covered", 1)[1]
    return dict(re.findall(r"(?m)^- `([^`]+)`: (.+)$", tail))


async def review(
    client: Client, store: Store, settings: Settings, workspace: Path, record_as: str = ""
) -> tuple[RunResult, str, list[str]]:
    """The review to its end: its result, the coverage section, the parts it started.
    With KEEL_RECORD_HISTORY set, its history is written to tests/histories/`record_as`
    (test_replay.py replays every history there)."""
    async with in_process_worker(client, store, settings):
        handle = await start_run(
            client, settings, workspace, spec=agent("review", coverage_plans=True)
        )
        result = await handle.result()
    history = await handle.fetch_history()
    started = [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]
    if os.environ.get("KEEL_RECORD_HISTORY") and record_as:
        (HISTORIES / record_as).write_text(json.dumps(history.to_json_dict(), indent=1))
    run = await store.get_run(result.run_id)
    assert run is not None and run.report is not None
    assert run.report.count(COVERAGE_SECTION_HEADING) == 1
    return result, run.report.split(COVERAGE_SECTION_HEADING, 1)[1], started


async def test_files_a_part_left_unread_are_read_by_the_next_round(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[Turn(content="## Summary\nA tiny package.")],
            conversations=[
                # Round 1 has all three files and stops after the first.
                part("1-1", ["README.md"]),
                # Round 2 is handed the two left, and reads them.
                part("2-1", ["pkg/__init__.py", "pkg/core.py"]),
            ],
        )
    )
    settings = settings_for(llm, workspace, coverage_plans=True)
    result, section, started = await review(
        temporal_client, store, settings, workspace, record_as="agent_run_coverage_rounds.json"
    )

    assert result.status == "completed", result.error
    assert result.coverage is not None and result.coverage.status == "complete"
    assert result.coverage.files_covered == result.coverage.files_total == len(FILES)
    root = result.run_id
    assert started == [f"{root}-part-1-1", f"{root}-part-2-1"]
    # Round 2 was handed only the files round 1 left.
    second = await store.get_run(f"{root}-part-2-1")
    assert second is not None
    assert second.input.endswith("## Files to read\n- pkg/__init__.py\n- pkg/core.py")
    assert "in 2 parts over 2 rounds" in section
    assert reviewed(section) == {
        "README.md": f"{root}-part-1-1",
        "pkg/__init__.py": f"{root}-part-2-1",
        "pkg/core.py": f"{root}-part-2-1",
    }
    assert not_covered(section) == {}
    assert llm.requests_of("Review part 3-1 of") == {}


async def test_a_file_whose_last_part_failed_is_not_covered_and_says_why(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[Turn(content="## Summary\nA tiny package, partly read.")],
            conversations=[
                part("1-1", ["README.md"]),
                part("2-1", ["pkg/__init__.py"]),
                # The third and last round, handed pkg/core.py, fails.
                failing_part("3-1"),
            ],
        )
    )
    settings = settings_for(llm, workspace, coverage_plans=True, llm_max_attempts=1)
    result, section, started = await review(temporal_client, store, settings, workspace)

    assert result.status == "completed", result.error
    assert result.coverage is not None and result.coverage.status == "partial"
    assert result.coverage.files_covered == 2
    root = result.run_id
    assert started == [f"{root}-part-{r}-1" for r in (1, 2, 3)]
    failed = await store.get_run(f"{root}-part-3-1")
    assert failed is not None and failed.status == "failed"
    assert "in 3 parts over 3 rounds" in section
    assert reviewed(section) == {
        "README.md": f"{root}-part-1-1",
        "pkg/__init__.py": f"{root}-part-2-1",
    }
    assert not_covered(section) == {
        "pkg/core.py": f"a sub-agent failed: its part's run {root}-part-3-1 ended failed"
    }
    record = await store.get_run(root)
    assert record is not None and record.coverage is not None
    assert record.coverage.unread == {
        "pkg/core.py": f"a sub-agent failed: its part's run {root}-part-3-1 ended failed"
    }
