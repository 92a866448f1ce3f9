"""Coverage plans and the ledger's arithmetic: what must be read, in which parts, and
when a file counts as read."""

from __future__ import annotations

import pytest

from keel.activities.coverage import readers
from keel.activities.store.coverage_store import FileView, views_in
from keel.worker.agent_catalog import (
    AgentCatalog,
    AgentDefinitionError,
    link_subagents,
    parse_agent,
)
from keel.workflows.context.budget import cap_output
from keel.workflows.run.coverage_plan import (
    PART_MAX_FILES,
    SIZE_CAP_BYTES,
    WorkspaceFile,
    pages_of,
    plan_parts,
    skip_reason,
)


def file(path: str, size: int = 9_000, **flags: bool) -> WorkspaceFile:
    return WorkspaceFile(path=path, bytes=size, lines=max(1, size // 40), **flags)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (file("src/app.py"), None),
        (file("README.md"), None),
        (file("assets/logo.png", binary=True), "binary"),
        (file("third_party/lib.py"), "vendored"),
        (file("web/vendor/jquery.js"), "vendored"),
        (file("static/app.min.js"), "vendored"),
        (file("package-lock.json"), "vendored"),
        (file("api/schema_pb2.py", generated=True), "generated"),
        (file("src/empty.py", 0), "empty"),
        (file("data/dump.sql", SIZE_CAP_BYTES + 1), "over_size_cap"),
    ],
)
def test_a_file_is_left_out_only_by_a_rule(entry: WorkspaceFile, reason: str | None) -> None:
    assert skip_reason(entry) == reason


def test_parts_fit_the_window_and_keep_neighbours_together() -> None:
    files = [file(f"pkg_{i // 20:02d}/m_{i:03d}.py") for i in range(100)]
    files.append(file("pkg_00/big.py", 200_000))
    usable = 12_000
    parts = plan_parts(list(reversed(files)), usable, 1)
    assert [p for part in parts for p in part.files] == sorted(f.path for f in files)
    budget = usable * 2 * 4
    sizes = {f.path: f.bytes + 8 * f.lines for f in files}
    for part in parts:
        assert len(part.files) <= PART_MAX_FILES
        assert len(part.files) == 1 or sum(sizes[p] for p in part.files) <= budget
        pages = sum(pages_of(f, usable) for f in files if f.path in part.files)
        assert part.max_steps > pages and part.max_tool_calls > pages
    assert [p.label for p in parts] == [f"1-{i}" for i in range(1, len(parts) + 1)]
    # Decided from the listing alone: the same plan every time (replay decides the same).
    assert plan_parts(files, usable, 1) == parts


def test_a_large_file_is_planned_as_several_pages() -> None:
    assert pages_of(file("a.py", 4_000), 12_000) == 1
    assert pages_of(file("a.py", 200_000), 12_000) > 10


def test_a_read_shows_only_the_lines_the_budget_let_through() -> None:
    text = "a.py (lines 1-400 of 400)\n" + "\n".join(f"{n:>6}\tx = {n}" for n in range(1, 401))
    cut = cap_output("read_file", '{"path": "a.py"}', text, 500)
    [view] = views_in("run-1", [{"role": "tool", "content": cut}])
    assert (view.path, view.first, view.total) == ("a.py", 1, 400)
    assert 100 < view.last < 400
    # A pruned stub, an error or a listing shows no lines.
    assert not views_in(
        "run-1",
        [
            {"role": "tool", "content": "[pruned: read_file {}, 900 tokens; call it again]"},
            {"role": "tool", "content": "Error: 'a.bin' looks like a binary file"},
            {"role": "assistant", "content": "a.py (lines 1-2 of 2)\n     1\tx"},
        ],
    )


def test_a_read_of_a_path_with_spaces_counts_for_that_path() -> None:
    text = "docs/my file (lines 1-2 of 9).md (lines 1-2 of 2)\n     1\t# Notes\n     2\tend"
    [view] = views_in("run-1", [{"role": "tool", "content": text}])
    assert (view.path, view.first, view.last, view.total) == (
        "docs/my file (lines 1-2 of 9).md",
        1,
        2,
        2,
    )
    paged = "docs/my file.md (lines 41-80 of 90)\n" + "\n".join(
        f"{n:>6}\tline {n}" for n in range(41, 81)
    )
    [page] = views_in("run-1", [{"role": "tool", "content": paged + "\n[output truncated]"}])
    assert (page.path, page.first, page.last, page.total) == ("docs/my file.md", 41, 80, 90)


def test_a_file_is_read_once_every_line_was_shown_to_some_run() -> None:
    views = [
        FileView("part-1", "a.py", 1, 150, 400),
        FileView("part-2", "a.py", 151, 400, 400),
        FileView("part-1", "b.py", 1, 100, 300),
        FileView("part-1", "b.py", 201, 300, 300),
        FileView("root", "c.py", 1, 10, 10),
        FileView("part-3", "c.py", 1, 10, 10),
    ]
    read = readers(views)
    assert read == {"a.py": ["part-1", "part-2"], "c.py": ["root", "part-3"]}


def test_coverage_in_an_agent_file_is_checked() -> None:
    text = "---\nname: auditor\ncoverage: {mode}\n---\nReview it.\n"
    assert parse_agent(text.format(mode="files"), "auditor.md").coverage == "files"
    assert parse_agent(text.replace("coverage: {mode}\n", ""), "a.md").coverage == "model"
    with pytest.raises(AgentDefinitionError, match="coverage"):
        parse_agent(text.format(mode="all"), "auditor.md")


def test_the_review_agent_covers_files_unless_plans_are_off() -> None:
    review = AgentCatalog.load().get("review")
    assert review is not None and review.coverage == "files"
    off = AgentCatalog.load(coverage_plans=False).get("review")
    assert off is not None and off.coverage == "model"


def test_coverage_needs_the_explore_agent_to_run_its_parts() -> None:
    spec = parse_agent("---\nname: auditor\ncoverage: files\n---\nReview it.\n", "auditor.md")
    with pytest.raises(AgentDefinitionError, match="explore"):
        link_subagents({"auditor": spec}, {"auditor": "auditor.md"})
