"""Coverage planning: which files of a workspace a review must read, and in which parts.

Pure code over the listing an activity made (`keel.activities.coverage`), so the
workflow decides the same on replay. A file is left out only by a rule that says why
(binary, generated, vendored, empty, over the size cap); every other file must be
read, and is split with its neighbours into parts that a sub-agent can read within
its model's window, each with step and tool-call limits that fit its pages.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

__all__ = [
    "COVERAGE_SECTION_HEADING",
    "SKIP_TEXT",
    "CoverageClose",
    "CoverageRecord",
    "CoverageState",
    "CoverageSummary",
    "ListWorkspaceInput",
    "PartsNoteInput",
    "PlannedPart",
    "WorkspaceFile",
    "WorkspaceListing",
    "plan_parts",
    "skip_reason",
]

# A file larger than this is not read: a lock file or a data dump, not code to review.
SIZE_CAP_BYTES = 1_000_000
# Numbered lines (`    12\t`) make a read's output this much larger than the file.
LINE_OVERHEAD_CHARS = 8
CHARS_PER_TOKEN = 4
# Of the usable window, one read output may take this share (`context.budget.OUTPUT_SHARE`).
PAGE_SHARE = 0.25
# A part holds up to this many windows of source: a sub-agent reads it page by page,
# pruning and compaction keep its conversation within the window.
PART_WINDOWS = 2.0
PART_MAX_FILES = 15
# Steps and tool calls a part may spend beyond one a page: its answer, a nudge, a retry.
PART_SPARE_STEPS = 6
# Rounds of parts in all: the first, then files left unread handed out again.
MAX_ROUNDS = 3
# Path segments that mark code someone else wrote and ships with the project.
VENDORED_DIRS = frozenset({"vendor", "vendored", "third_party", "third-party", "_vendor"})
VENDORED_SUFFIXES = (".min.js", ".min.css", ".map")
LOCK_FILES = frozenset(
    {"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "uv.lock", "Cargo.lock"}
)
COVERAGE_SECTION_HEADING = "## Coverage recorded by Keel"

SkipReason = Literal["binary", "generated", "vendored", "empty", "over_size_cap"]
SKIP_TEXT: dict[SkipReason, str] = {
    "binary": "binary",
    "generated": "generated (by rule: a generated-code marker in its first lines)",
    "vendored": "vendored (by rule: a vendored directory, lock file or minified file)",
    "empty": "empty",
    "over_size_cap": f"over the size cap of {SIZE_CAP_BYTES:,} bytes",
}


class WorkspaceFile(BaseModel):
    """One file of the workspace, as the listing saw it."""

    path: str = Field(description="Workspace-relative, `/`-separated.")
    bytes: int = Field(ge=0)
    lines: int = Field(ge=0)
    binary: bool = False
    generated: bool = Field(default=False, description="A generated-code marker in its head.")


class ListWorkspaceInput(BaseModel):
    """Input of `list_workspace`: the run's workspace and the window its parts read with."""

    run_id: str
    workspace: str
    model: str
    context_window: int | None = None
    tenant_id: str = "default"


class WorkspaceListing(BaseModel):
    """Output of `list_workspace`."""

    files: list[WorkspaceFile] = Field(default_factory=list)
    usable_tokens: int = Field(ge=1, description="The window a run of the model may fill.")
    truncated: bool = Field(default=False, description="The listing stopped at its cap.")
    window_cost_usd: float = Field(
        default=0.0,
        ge=0,
        description="What a prompt filling that window costs by the worker's price table "
        "(0: the model has no price): the least a part needs of a cost ceiling.",
    )


class PlannedPart(BaseModel):
    """A part of the workspace for one sub-agent: its files and the limits that fit them."""

    label: str = Field(description="`round-index`, 1-based: names the child run.")
    files: list[str]
    max_steps: int = Field(ge=1)
    max_tool_calls: int = Field(ge=1)


class CoverageState(BaseModel):
    """What the run keeps of its coverage plan until it ends (for the coverage section)."""

    files: list[str] = Field(default_factory=list, description="Files the plan must read.")
    skipped: dict[str, SkipReason] = Field(
        default_factory=dict, description="Files left out by rule, with the rule."
    )
    unread: dict[str, str] = Field(
        default_factory=dict, description="Files still unread after the parts, with why."
    )
    stopped_by: Literal["budget", "token_budget"] | None = Field(
        default=None,
        description="The limit that left files unread, if one did (`token_budget`: as runs "
        "recorded before ceilings in cost said it).",
    )
    parts: int = Field(default=0, description="Parts run, over all rounds.")
    rounds: int = 0
    truncated: bool = False


class PartsNoteInput(BaseModel):
    """Input of `note_parts`: the parts' answers become a note the run's model reads."""

    run_id: str
    tenant_id: str
    usable_tokens: int
    parts: list[str] = Field(description="The part children's run ids, in order.")


class CoverageClose(BaseModel):
    """Input of `close_coverage`: the plan's account, to check against the ledger."""

    run_id: str
    tenant_id: str
    state: CoverageState
    stop_reason: str


class CoverageSummary(BaseModel):
    """What the ledger says of a run's coverage: stored on the run, shown everywhere."""

    status: Literal["complete", "partial"]
    files_total: int = Field(description="Files the plan had to read.")
    files_covered: int
    files_skipped: int = Field(default=0, description="Left out by rule (binary, generated...).")
    unread: list[str] = Field(
        default_factory=list, description="Files to read that no run of the tree read whole."
    )


def skip_reason(file: WorkspaceFile) -> SkipReason | None:
    """Why the plan leaves `file` out, or None if it must be read."""
    parts = file.path.split("/")
    name = parts[-1]
    if file.binary:
        return "binary"
    if any(p in VENDORED_DIRS for p in parts[:-1]) or name in LOCK_FILES:
        return "vendored"
    if name.endswith(VENDORED_SUFFIXES):
        return "vendored"
    if file.generated:
        return "generated"
    if file.bytes == 0:
        return "empty"
    if file.bytes > SIZE_CAP_BYTES:
        return "over_size_cap"
    return None


def pages_of(file: WorkspaceFile, usable_tokens: int) -> int:
    """How many read outputs it takes to see all of `file` on this window."""
    chars = file.bytes + LINE_OVERHEAD_CHARS * max(1, file.lines)
    page_chars = max(256, int(usable_tokens * PAGE_SHARE) * CHARS_PER_TOKEN)
    return max(1, math.ceil(chars / page_chars))


def plan_parts(files: list[WorkspaceFile], usable_tokens: int, round_: int) -> list[PlannedPart]:
    """Neighbouring files together, each part within `PART_WINDOWS` of the window."""
    budget = int(usable_tokens * PART_WINDOWS) * CHARS_PER_TOKEN
    groups: list[list[WorkspaceFile]] = []
    size = 0
    for file in sorted(files, key=lambda f: f.path):
        chars = file.bytes + LINE_OVERHEAD_CHARS * file.lines
        if groups and size + chars <= budget and len(groups[-1]) < PART_MAX_FILES:
            groups[-1].append(file)
            size += chars
        else:
            groups.append([file])
            size = chars
    parts = []
    for index, group in enumerate(groups, start=1):
        pages = sum(pages_of(f, usable_tokens) for f in group)
        parts.append(
            PlannedPart(
                label=f"{round_}-{index}",
                files=[f.path for f in group],
                max_steps=pages + PART_SPARE_STEPS,
                max_tool_calls=2 * pages + PART_SPARE_STEPS,
            )
        )
    return parts


class CoverageRecord(BaseModel):
    """A run's coverage as Postgres keeps it (`runs.coverage`), for every surface to show."""

    status: Literal["complete", "partial"]
    files_total: int
    files_covered: int
    files_skipped: int = 0
    unread: dict[str, str] = Field(
        default_factory=dict, description="Files to read that were not read whole, with why."
    )
    section: str = Field(default="", description="The report's coverage section.")
