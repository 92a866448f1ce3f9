"""`keel eval`: run scenario files as durable runs, print the table, gate CI."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table
from rich.text import Text

from keel.api.cli.client import KeelApiError, KeelClient
from keel.api.cli.tables import id_column
from keel.api.core.schemas.evals import EvalResultCreate
from keel.api.evals.reports import junit_xml, markdown_report
from keel.api.evals.results import AttemptResult, Change, EvalReport, compare
from keel.api.evals.runner import EvalRunner, model_names
from keel.api.evals.scenario import Scenario, ScenarioError, bundled_scenarios, load_scenarios
from keel.api.evals.stack import eval_stack
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import StackError

__all__ = ["eval_command"]

console = Console()
err_console = Console(stderr=True)
VERDICT_STYLE = {"better": "green", "worse": "red", "same": "dim", "new": "cyan", "gone": "yellow"}


def _results_table(report: EvalReport) -> Table:
    table = Table(
        id_column("scenario", (s.name for s in report.scenarios)),
        *("result", "passed", "failed expectation", "steps", "tokens", "cost", "duration"),
    )
    for s in report.scenarios:
        ok = report.passed(s)
        table.add_row(
            Text(s.name),
            Text("pass" if ok else "FAIL", style="green" if ok else "bold red"),
            f"{s.passes}/{len(s.attempts)} ({s.pass_rate:.0%})",
            Text("\n".join(s.failures) or "-"),
            f"{s.mean('steps'):.1f}",
            f"{s.mean('tokens'):.0f}",
            f"${s.mean('cost_usd'):.4f}",
            f"{s.mean('duration_s'):.1f} s",
        )
    return table


def _changes_table(changes: list[Change]) -> Table:
    table = Table(
        id_column("scenario", (c.name for c in changes)), "against the baseline", "what moved"
    )
    for c in changes:
        table.add_row(
            Text(c.name),
            Text(c.verdict, style=VERDICT_STYLE[c.verdict]),
            Text("; ".join(c.notes) or "-"),
        )
    return table


async def _run_all(
    scenarios: list[Scenario],
    settings: Settings,
    work_dir: Path,
    *,
    eval_id: str,
    repeat: int,
    concurrency: int,
    min_pass_rate: float,
) -> EvalReport:
    models = model_names(scenarios)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("starting Keel", total=len(scenarios) * repeat)

        def finished(scenario: Scenario, result: AttemptResult) -> None:
            # Text, not markup: names and failures may quote what the model wrote.
            mark = Text("✓ ", style="green") if result.passed else Text("✗ ", style="red")
            why = "" if result.passed else f" — {result.failures[0]}"
            line = (
                f"{scenario.name} #{result.attempt} ({result.steps} steps, {result.tokens} tokens)"
            )
            progress.console.print(Text.assemble(mark, line + why), soft_wrap=True)
            progress.advance(task)

        async with eval_stack(scenarios, models, settings, work_dir) as (client, info):
            progress.update(task, description=f"running on {info.api_url}")
            runner = EvalRunner(client, work_dir, concurrency=concurrency, on_result=finished)
            report = await runner.run(scenarios, models, repeat=repeat, min_pass_rate=min_pass_rate)
            await _record(client, eval_id, report, info.settings)
            return report


async def _record(client: KeelClient, eval_id: str, report: EvalReport, settings: Settings) -> None:
    """Keep the results with the runs, for the console; a refusal only warns, since the
    results file and the exit status already say what happened."""
    try:
        await client.record_eval(EvalResultCreate(id=eval_id, report=report))
    except KeelApiError as exc:
        err_console.print(f"warning: the results were not recorded in Keel: {exc}", markup=False)
        return
    console.print(f"Recorded as {eval_id} ({where_recorded(settings)}).", highlight=False)


def where_recorded(settings: Settings) -> str:
    """Which console lists the results: the eval's embedded stack stops with the command,
    and `keel dev`'s own console does not see its data."""
    if "host=/" in (settings.database_url or ""):
        return (
            f"`KEEL_DATA_DIR={settings.data_dir} keel dev` lists it and its runs "
            "on the console's Evals page"
        )
    return "the Evals page of the console of any Keel on this DATABASE_URL lists it"


def eval_command(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Scenario files or directories of them; none: the built-in ones."),
    ] = None,
    repeat: Annotated[int, typer.Option(help="Run each scenario N times.", min=1)] = 1,
    concurrency: Annotated[int, typer.Option(help="Runs at once.", min=1, max=64)] = 4,
    min_pass_rate: Annotated[
        float, typer.Option(help="Share of a scenario's runs that must pass.", min=0, max=1)
    ] = 1.0,
    baseline: Annotated[
        Path | None, typer.Option(help="An earlier results file to compare against.")
    ] = None,
    fail_on_regression: Annotated[
        bool, typer.Option(help="Exit 1 when a scenario got worse than the baseline.")
    ] = False,
    results: Annotated[
        Path | None, typer.Option(help="Where to write the results (JSON, for --baseline).")
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="Where to write JUnit XML.")] = None,
    markdown: Annotated[
        Path | None, typer.Option(help="Where to write the Markdown report.")
    ] = None,
) -> None:
    """Run eval scenarios as durable runs and check their expectations (exit 1 on failure)."""
    settings = Settings()
    try:
        scenarios = load_scenarios(paths or [bundled_scenarios()])
        earlier = EvalReport.load(baseline) if baseline is not None else None
    except (ScenarioError, ValueError) as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from None
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    evals_dir = settings.data_dir.expanduser().resolve() / "evals"
    work_dir = evals_dir / "workspaces" / stamp
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        report = asyncio.run(
            _run_all(
                scenarios,
                settings,
                work_dir,
                eval_id=f"eval-{stamp}-{uuid.uuid4().hex[:6]}",
                repeat=repeat,
                concurrency=concurrency,
                min_pass_rate=min_pass_rate,
            )
        )
    except (KeelApiError, StackError, ScenarioError) as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from None
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    changes = compare(report, earlier) if earlier is not None else None
    console.print(_results_table(report))
    if changes is not None:
        console.print(_changes_table(changes))
    saved = results or evals_dir / "results" / f"eval-{stamp}.json"
    report.save(saved)
    console.print(f"Results saved to {saved} (compare later runs with --baseline {saved})")
    for path, text in ((junit, junit_xml(report)), (markdown, markdown_report(report, changes))):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            console.print(f"Wrote {path}")
    regressed = changes is not None and any(c.verdict == "worse" for c in changes)
    if not report.ok or (fail_on_regression and regressed):
        raise typer.Exit(code=1)
