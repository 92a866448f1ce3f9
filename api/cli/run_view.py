"""One run in the terminal, as a person reads it: what it was asked, how it ended, what it
cost, the sub-agent runs below it as a tree, then its report. `keel runs show --json` is
the raw form for scripts. Every value the run or its model wrote is plain `Text`, never
console markup."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from keel.api.cli.progress import usage_text
from keel.api.cli.report_view import report_view
from keel.api.core.schemas.runs import RunChildPublic, RunPublic

__all__ = ["run_tree", "run_view"]

# The task is shown whole up to this many characters; `--json` has all of it.
TASK_CHARS = 600


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z").strip() if moment else ""


def _took(run: RunPublic) -> str:
    if run.started_at is None or run.finished_at is None:
        return ""
    seconds = int((run.finished_at - run.started_at).total_seconds())
    return f" (took {seconds // 60}m {seconds % 60}s)" if seconds >= 60 else f" (took {seconds}s)"


def _count(nodes: list[RunChildPublic]) -> int:
    return sum(1 + _count(node.children) for node in nodes)


def run_tree(run: RunPublic) -> Tree:
    """The run and its sub-agent runs, each with its status and its own usage."""

    def label(node: RunPublic | RunChildPublic) -> Text:
        usage = node.usage
        return Text(
            f"{node.id}  {node.agent}  {node.status}  "
            f"{usage.total_tokens:,} tokens  ${usage.cost_usd:.4f}"
        )

    def add(branch: Tree, children: list[RunChildPublic]) -> None:
        for child in children:
            add(branch.add(label(child)), child.children)

    tree = Tree(label(run))
    add(tree, run.children)
    if run.total_usage is not None:
        total = run.total_usage
        tree.add(
            Text(f"total with sub-agents: {total.total_tokens:,} tokens  ${total.cost_usd:.4f}")
        )
    return tree


def run_view(run: RunPublic) -> Group:
    """The run's facts, its tree of sub-agent runs (if any) and its report."""
    ended = f" · stop reason {run.stop_reason}" if run.stop_reason else ""
    covered = run.coverage
    if covered is not None:
        # What Keel's records show was read: a partial review never reads as just "completed".
        files = f"{covered.files_covered} of {covered.files_total} files"
        ended = f" · {covered.status} · {files}{ended}"
    heading = Text.assemble(
        ("Run ", "bold"), (run.id, "bold"), f"  {run.agent}  ", (run.status, "bold"), ended
    )
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim", no_wrap=True)
    facts.add_column()
    task = run.input if len(run.input) <= TASK_CHARS else run.input[:TASK_CHARS] + " …"
    rows: list[tuple[str, str]] = [
        ("task", task),
        ("workspace", run.workspace),
        ("model", run.model),
        ("trigger", f"{run.trigger} · by {run.requester}"),
        ("created", _when(run.created_at)),
        ("finished", _when(run.finished_at) + _took(run)),
        (
            "usage",
            f"{run.steps} steps · {run.tool_calls} tool calls · "
            + usage_text(run.usage.total_tokens, run.total_usage, run.usage.cost_usd),
        ),
    ]
    if run.coverage is not None:
        coverage = run.coverage
        rows.append(
            (
                "coverage",
                f"{coverage.status} · {coverage.files_covered} of {coverage.files_total} files",
            )
        )
    if run.schedule_id:
        rows.append(("schedule", run.schedule_id))
    if run.session_id:
        rows.append(("session", run.session_id))
    if run.parent_run_id:
        rows.append(("parent", run.parent_run_id))
    if run.forked_from:
        rows.append(("forked from", f"{run.forked_from} at step {run.forked_at_step}"))
        if run.forked_tree:
            rows.append(("its files then", f"git commit {run.forked_tree}"))
    if run.pending_interactions:
        rows.append(("waiting on", ", ".join(run.pending_interactions)))
    if run.error:
        rows.append(("error", run.error))
    for name, value in rows:
        if value:
            facts.add_row(name, Text(value))
    parts: list[RenderableType] = [heading, facts]
    if run.children:
        below = _count(run.children)
        parts += [
            Text(
                f"\nSub-agent runs: {run.child_count} started directly, {below} in all",
                style="bold",
            ),
            run_tree(run),
        ]
    if run.report:
        parts += [Text("\nReport", style="bold"), report_view(run.report)]
    return Group(*parts)
