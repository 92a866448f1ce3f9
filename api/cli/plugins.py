"""`keel plugins`: what this installation's workers load, and what they refuse and why."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from keel.worker.agent_catalog import AgentCatalog, AgentDefinitionError
from keel.worker.config.settings import Settings

plugins_app = typer.Typer(
    help="Installed plugins (tools, hooks, agents, model providers).", no_args_is_help=True
)
console = Console()


@plugins_app.command("list")
def list_plugins(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per plugin.")] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 if any plugin is refused (for CI).")
    ] = False,
) -> None:
    """Plugins found in the `keel.plugins` entry-point group: loaded, or refused and why.

    Loaded the way a worker started here loads them (with `KEEL_AGENTS_DIR`), so
    what it shows is what `keel worker` and `keel api` will use."""
    agents_dir: Path | None = Settings().agents_dir
    try:
        reports = AgentCatalog.load(agents_dir).plugins.report()
    except AgentDefinitionError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=1) from None
    if as_json:
        for report in reports:
            typer.echo(json.dumps(asdict(report)))
    elif not reports:
        console.print("No plugins installed (entry-point group keel.plugins).")
    else:
        table = Table("plugin", "version", "status", "from", "provides / reason")
        for r in reports:
            if r.status == "loaded":
                provides = "; ".join(
                    part
                    for part in (
                        f"tools: {', '.join(r.tools)}" if r.tools else "",
                        f"hooks: {', '.join(r.hooks)}" if r.hooks else "",
                        f"agents: {', '.join(r.agents)}" if r.agents else "",
                        f"providers: {', '.join(r.providers)}" if r.providers else "",
                    )
                    if part
                )
                table.add_row(r.name, r.version, "[green]loaded[/green]", r.source, provides)
            else:
                name = r.name or r.entry_point
                table.add_row(name, r.version, "[red]refused[/red]", r.source, r.reason)
        console.print(table)
    if strict and any(r.status == "refused" for r in reports):
        raise typer.Exit(code=1)
