"""The `keel` command line."""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from keel.api.cli.ceiling_options import CEILING_FLAGS, MaxCost, MaxTokens, cost_usd
from keel.api.cli.client import KeelApiError, KeelClient
from keel.api.cli.command_errors import fail, run_command
from keel.api.cli.connection import keel_api
from keel.api.cli.console_link import console_link
from keel.api.cli.coordinations import coordinations_app
from keel.api.cli.dev import dev
from keel.api.cli.edited_args import ArgumentsError, argument_changes, read_arguments
from keel.api.cli.evals import eval_command
from keel.api.cli.fork_command import fork
from keel.api.cli.local_stack import serve_api
from keel.api.cli.local_tools import LOCAL_TOOLS, local_executor
from keel.api.cli.memories import memories_app
from keel.api.cli.originals import original_command
from keel.api.cli.payload_keys import keys_app
from keel.api.cli.plugins import plugins_app
from keel.api.cli.progress import Decider, follow_run, terminal_decider, usage_text
from keel.api.cli.quotas import quota_app, usage_command
from keel.api.cli.report_view import report_view
from keel.api.cli.request_body import ignored_model, model_option, request_body
from keel.api.cli.retention import retention_app
from keel.api.cli.rules_commands import UNTIL, grant_scope, rules_app
from keel.api.cli.runs_commands import runs_app
from keel.api.cli.schedules import schedules_app
from keel.api.cli.secret_command import secret_command
from keel.api.cli.setup import setup_app
from keel.api.cli.tables import id_column
from keel.api.core.schemas.interactions import InteractionDecisionCreate
from keel.api.core.schemas.runs import RunCreate, RunPublic
from keel.api.identity.auth import dev_token
from keel.api.identity.config import local_secret
from keel.worker.cluster_check import ClusterSetupError
from keel.worker.config.masking import MaskingSetupError
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import StackError, free_port
from keel.worker.observability.log_format import configure_logging
from keel.worker.observability.quiet_logs import quiet_expected_failures

app = typer.Typer(help="Keel: durable LLM agents on Temporal.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
app.command("fork")(fork)
app.add_typer(rules_app, name="rules")
audit_app = typer.Typer(help="The hash-chained audit log (needs keel:admin).", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
app.add_typer(schedules_app, name="schedules")
app.add_typer(coordinations_app, name="coordinations")
app.add_typer(keys_app, name="keys")
app.add_typer(retention_app, name="retention")
app.add_typer(plugins_app, name="plugins")
app.add_typer(memories_app, name="memories")
app.add_typer(setup_app, name="setup")
app.add_typer(quota_app, name="quota")
app.command("usage")(usage_command)
app.command("eval")(eval_command)
app.command("secret")(secret_command)
app.command("original")(original_command)
app.command()(dev)
console = Console()
err_console = Console(stderr=True)


@app.command("console")
def console_command() -> None:
    """Print a link that opens the web console signed in as the local user."""
    settings = Settings()
    link = console_link(settings, settings.resolved_api_url)
    console.print(link, soft_wrap=True, highlight=False)


@app.command()
def worker() -> None:
    """Run only a worker (needs TEMPORAL_ADDRESS and DATABASE_URL)."""
    settings = Settings()
    if settings.temporal_address is None or settings.database_url is None:
        raise fail("keel worker needs TEMPORAL_ADDRESS and DATABASE_URL; `keel dev` needs neither.")
    configure_logging(settings)
    # Imported here, as in `mcp`: the commands that only call the API start faster.
    from keel.worker.runtime import run_worker_forever

    try:
        asyncio.run(run_worker_forever(settings))
    except KeyboardInterrupt:
        pass
    except (ClusterSetupError, MaskingSetupError) as exc:
        raise fail(str(exc)) from None


@app.command()
def api() -> None:
    """Serve only the API (needs TEMPORAL_ADDRESS and DATABASE_URL)."""
    settings = Settings()
    if settings.temporal_address is None or settings.database_url is None:
        raise fail("keel api needs TEMPORAL_ADDRESS and DATABASE_URL; `keel dev` needs neither.")
    configure_logging(settings)

    async def main() -> None:
        async with serve_api(settings) as url:
            console.print(f"Keel API at {url}")
            await asyncio.Event().wait()

    try:
        run_command(main())
    except KeyboardInterrupt:
        pass


@app.command("mcp")
def mcp_command() -> None:
    """Serve MCP over stdin/stdout for desktop clients (Claude Desktop, IDEs): Keel's
    tools, resources and prompts, through the running Keel (or an embedded stack)."""
    settings = Settings()
    configure_logging(settings, level=logging.WARNING)
    from keel.api.cli.mcp_stdio import serve_stdio

    try:
        run_command(serve_stdio(settings))
    except KeyboardInterrupt:
        pass


def _save_report(run: RunPublic, out: Path | None, data_dir: Path) -> Path:
    path = out or data_dir / "reports" / f"{run.id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run.report or "")
    return path


def _decider() -> Decider | None:
    """Prompt for decisions only when a person is at the terminal."""
    return terminal_decider(console) if sys.stdin.isatty() else None


async def _start_and_follow(
    settings: Settings,
    body: RunCreate,
    out: Path | None,
    *,
    ui: bool = False,
    decider: Decider | None = None,
    reads_here: Path | None = None,
) -> RunPublic:
    async with keel_api(KeelClient, settings, ui=ui, choose_model=True) as (client, info):
        if info.started_here:
            console.print(f"[dim]Started an embedded stack (API {info.api_url}).[/dim]")
            if info.model and info.model.offline:
                for label, line in zip(["Model: ", ""], info.model.banner(), strict=False):
                    console.print(f"[dim]{label}{escape(line)}[/dim]", highlight=False)
        run = await client.create_run(body)
        # With --local-tools the files read are this machine's, not the server's workspace.
        where = f"{reads_here} (read here)" if reads_here else run.workspace
        console.print(f"Run [bold]{run.id}[/bold] ({run.agent}) on {where}")
        if not info.started_here and ignored_model(settings, body, run.model):
            console.print(
                f"[yellow]note:[/yellow] KEEL_MODEL={settings.model} is this shell's; the running "
                f"Keel at {info.api_url} uses {run.model}. Pass --model to choose it per run.",
                highlight=False,
            )
        run = await follow_run(client, run.id, console, decider or _decider())
    _report(run, out, info.settings.data_dir)
    return run


def _report(run: RunPublic, out: Path | None, data_dir: Path) -> None:
    if run.report:
        console.print(report_view(run.report))
        saved = _save_report(run, out, data_dir)
        # A path to copy: whole on one line, and never read as markup.
        console.print(f"\nReport saved to {saved}", soft_wrap=True, markup=False)
    usage = usage_text(run.usage.total_tokens, run.total_usage, run.usage.cost_usd)
    covered = ""
    if run.coverage is not None:
        # What Keel's records show was read: a partial review never reads as just "completed".
        coverage = run.coverage
        covered = f"{coverage.status} · {coverage.files_covered} of {coverage.files_total} files · "
    console.print(
        f"[bold]{run.status}[/bold] · {covered}stop reason {run.stop_reason} · {run.steps} steps · "
        f"{run.tool_calls} tool calls · {usage}"
    )
    if run.status != "completed":
        raise fail(run.error or f"The run ended {run.status}.")


@app.command()
def review(
    path: Annotated[Path, typer.Argument(help="Directory to review.")] = Path("."),
    agent: Annotated[str, typer.Option(help="Agent to run.")] = "review",
    prompt: Annotated[
        str, typer.Option(help="What to ask for.")
    ] = "Review this codebase and write your report.",
    out: Annotated[Path | None, typer.Option(help="Where to save the Markdown report.")] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model for this run (default: the agent's, else the Keel's KEEL_MODEL); "
            "a,b: b takes a step a fails."
        ),
    ] = None,
    max_tokens: MaxTokens = None,
    max_cost: MaxCost = None,
) -> None:
    """Review a directory and print the Markdown report."""
    target = path.expanduser().resolve()
    if not target.is_dir():
        raise fail(f"{target} is not a directory.")
    settings = Settings()
    if not target.is_relative_to(settings.workspace_root.resolve()):
        # A stack started here may work on the target; a running one decides for itself.
        settings = settings.model_copy(update={"workspace_root": target})
    body = request_body(
        RunCreate,
        flags={
            "agent": "--agent",
            "input": "--prompt",
            "workspace": "PATH",
            **CEILING_FLAGS,
        },
        agent=agent,
        input=prompt,
        workspace=str(target),
        trigger="cli",
        model=model_option(model),
        max_total_tokens=max_tokens,
        max_cost_usd=cost_usd(max_cost),
    )
    run_command(_start_and_follow(settings, body, out))


@app.command("run")
def run_agent(
    agent: Annotated[str, typer.Argument(help="Agent to run.")],
    prompt: Annotated[str, typer.Argument(help="The task.")],
    workspace: Annotated[Path, typer.Option(help="Directory the agent works on.")] = Path("."),
    out: Annotated[Path | None, typer.Option(help="Where to save the answer.")] = None,
    local_tools: Annotated[
        bool,
        typer.Option(
            "--local-tools",
            help="Run the read tools here, on --workspace: the server never sees the files.",
        ),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model for this run (default: the agent's, else the Keel's KEEL_MODEL); "
            "a,b: b takes a step a fails."
        ),
    ] = None,
    max_tokens: MaxTokens = None,
    max_cost: MaxCost = None,
) -> None:
    """Run any agent on a task."""
    target = workspace.expanduser().resolve()
    settings = Settings()
    ceilings = {"max_total_tokens": max_tokens, "max_cost_usd": cost_usd(max_cost)}
    if local_tools:
        if not target.is_dir():
            raise fail(f"{target} is not a directory.")
        # The server's own workspace is only where its other tools would work.
        body = request_body(
            RunCreate,
            flags=CEILING_FLAGS,
            agent=agent,
            input=prompt,
            workspace=".",
            trigger="cli",
            local_tools=LOCAL_TOOLS,
            model=model_option(model),
            **ceilings,
        )
        decider = local_executor(target, _decider())
        run_command(_start_and_follow(settings, body, out, decider=decider, reads_here=target))
        return
    if not target.is_relative_to(settings.workspace_root.resolve()):
        settings = settings.model_copy(update={"workspace_root": target})
    body = request_body(
        RunCreate,
        flags=CEILING_FLAGS,
        agent=agent,
        input=prompt,
        workspace=str(target),
        trigger="cli",
        model=model_option(model),
        **ceilings,
    )
    run_command(_start_and_follow(settings, body, out))


async def _decide(run_id: str, interaction_id: str, body: InteractionDecisionCreate) -> None:
    async with keel_api(KeelClient) as (client, _):
        if body.decision.startswith("approve"):
            ia = await client.interaction(run_id, interaction_id)
            console.print(
                escape(f"Approving {ia.tool} {ia.arguments} (hash {ia.payload_hash[:12]}…)")
            )
            for line in argument_changes(ia.arguments, body.arguments or ia.arguments):
                console.print(escape(f"  {line}"))
            body = body.model_copy(update={"payload_hash": ia.payload_hash})
        result = await client.decide(run_id, interaction_id, body)
    console.print(f"{interaction_id}: {result.status}, now {result.interaction.status}")


@app.command()
def approve(
    run_id: str,
    interaction_id: str,
    always: Annotated[
        bool,
        typer.Option("--always", help="Also allow calls like it: a grant (see `keel rules`)."),
    ] = False,
    scope: Annotated[
        str | None,
        typer.Option(help="With --always: call, run, session (default) or agent (every run)."),
    ] = None,
    pattern: Annotated[
        str | None, typer.Option(help="With --always: a glob over the subject; default: this one.")
    ] = None,
    until: Annotated[
        datetime | None,
        typer.Option(help="With --always: when the grant ends (with a time zone).", formats=UNTIL),
    ] = None,
    args: Annotated[
        str | None,
        typer.Option(
            "--args",
            help="Approve with these arguments instead (a JSON object, or a file holding one); "
            "they pass the same checks as the model's call.",
        ),
    ] = None,
) -> None:
    """Approve a pending tool call (the payload you are shown is the one that runs)."""
    if args is not None and always:
        raise fail("--args approves one edited call; it does not go with --always.")
    try:
        edited = read_arguments(args) if args is not None else None
    except ArgumentsError as exc:
        raise fail(str(exc)) from exc
    body = InteractionDecisionCreate(
        decision="approve_always" if always else "approve",
        arguments=edited,
        grant=grant_scope(always, scope, pattern, until),
    )
    run_command(_decide(run_id, interaction_id, body))


@app.command()
def reject(
    run_id: str,
    interaction_id: str,
    reason: Annotated[str | None, typer.Option(help="Told to the model.")] = None,
) -> None:
    """Reject a pending tool call or question."""
    body = request_body(
        InteractionDecisionCreate, flags={"text": "--reason"}, decision="reject", text=reason
    )
    run_command(_decide(run_id, interaction_id, body))


@app.command()
def answer(run_id: str, interaction_id: str, text: str) -> None:
    """Answer a question the agent asked."""
    body = request_body(
        InteractionDecisionCreate, flags={"text": "TEXT"}, decision="answer", text=text
    )
    run_command(_decide(run_id, interaction_id, body))


@app.command()
def interactions(run_id: str) -> None:
    """List a run's approval requests and questions."""

    async def main() -> None:
        async with keel_api(KeelClient) as (client, _):
            items = await client.interactions(run_id)
        table = Table(
            id_column("id", (ia.id for ia in items)),
            *("status", "tool", "subject", "expires", "decided by"),
        )
        for ia in items:
            table.add_row(
                ia.id,
                ia.status,
                ia.tool,
                ia.subject[:60],
                ia.expires_at.strftime("%Y-%m-%d %H:%M"),
                ia.decided_by or "",
            )
        console.print(table)

    run_command(main())


@app.command()
def token(
    tenant: Annotated[str, typer.Option(help="tenant_id claim.")] = "default",
    sub: Annotated[str, typer.Option(help="sub claim: the user.")] = "local",
    scope: Annotated[list[str] | None, typer.Option(help="Scopes, e.g. keel:admin.")] = None,
    ttl: Annotated[int, typer.Option(help="Lifetime in seconds.", min=60)] = 3600,
) -> None:
    """Print a bearer token signed with this machine's Keel secret (for curl and scripts)."""
    settings = Settings()
    secret = settings.jwt_secret or local_secret(settings.data_dir)
    console.print(
        dev_token(
            secret,
            tenant,
            sub,
            scopes=scope or [],
            ttl_s=ttl,
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
        ),
        soft_wrap=True,
    )


@app.command()
def coordinate(
    task: Annotated[str, typer.Argument(help="The task every agent gets.")],
    agent: Annotated[list[str], typer.Option("--agent", help="Base URL of an A2A agent (repeat).")],
    timeout: Annotated[int, typer.Option(help="Seconds each agent may take.", min=5)] = 1800,
    out: Annotated[Path | None, typer.Option(help="Where to save the merged report.")] = None,
    id_: Annotated[
        str | None,
        typer.Option("--id", help="Choose the coordination id; the same command again resumes it."),
    ] = None,
) -> None:
    """Send one task to several A2A agents and merge their answers into one report."""
    from keel.api.core.coordinations.schemas import CoordinationCreate

    body = request_body(
        CoordinationCreate,
        flags={"task": "TASK", "timeout_s": "--timeout", "id": "--id"},
        task=task,
        agents=[{"url": url} for url in agent],
        timeout_s=timeout,
        id=id_,
    )

    async def main() -> None:
        async with keel_api(KeelClient, Settings(), ui=False) as (api, info):
            started = await api.start_coordination(body)
            console.print(f"Coordinating {len(agent)} agents ({started.id})…")
            done = await api.wait_coordination(started.id)
        if done.report is None:
            raise StackError(done.error or f"Coordination {done.id} ended {done.status}.")
        console.print(report_view(done.report))
        path = out or info.settings.data_dir / "reports" / f"coordinate-{done.id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(done.report)
        console.print(f"\nReport saved to {path}", soft_wrap=True, markup=False)

    run_command(main())


@audit_app.command("verify")
def audit_verify(
    tenant: Annotated[str | None, typer.Option(help="Check one tenant's chain only.")] = None,
) -> None:
    """Check that no audit row was edited, deleted or reordered."""

    async def main() -> bool:
        async with keel_api(KeelClient) as (client, _):
            result = await client.verify_audit(tenant)
        if result.ok:  # the sentence says how many rows and chains were verified
            console.print(f"[green]{result.message}[/green]")
        else:
            console.print(f"[red]{result.message}[/red]")
            console.print(f"{result.rows_checked} rows in {result.chains_checked} chains checked.")
        return result.ok

    try:
        ok = asyncio.run(main())
    except (KeelApiError, StackError, ClusterSetupError) as exc:
        raise fail(str(exc)) from None
    if not ok:
        raise typer.Exit(code=1)


@app.command()
def demo(
    keep: Annotated[bool, typer.Option(help="Keep the demo's data directory.")] = True,
) -> None:
    """Review a bundled sample project with a scripted model: offline, end to end."""
    from keel.worker.scripted.llm import Script, ScriptedLLMServer

    base = Settings()
    data_dir = base.data_dir.expanduser().resolve() / "demo"
    workspace = data_dir / "workspace"
    if workspace.exists():
        shutil.rmtree(workspace)
    sample = resources.files("keel.api") / "sample_project"
    shutil.copytree(str(sample), workspace, ignore=shutil.ignore_patterns("__pycache__"))
    script = Script.load(Path(str(resources.files("keel.worker") / "scripts" / "demo_review.yaml")))
    with ScriptedLLMServer(script) as llm:
        settings = base.model_copy(
            update={
                "data_dir": data_dir,
                "workspace_root": workspace,
                "openai_base_url": llm.base_url,
                "model": script.name,
                "api_port": free_port(),
                "temporal_port": free_port(),
                "temporal_ui_port": free_port(),
                "api_url": None,
                # The script plays one model's whole review turn by turn, with no parts.
                "coverage_plans": False,
            }
        )
        console.print(f"[dim]Scripted model at {llm.base_url}; sample project in {workspace}[/dim]")
        body = request_body(
            RunCreate,
            agent="review",
            input="Review this codebase and write your report.",
            workspace=str(workspace),
            trigger="cli",
        )

        async def main() -> None:
            async with keel_api(KeelClient, settings, reuse_running=False) as (client, _):
                run = await client.create_run(body)
                console.print(f"Run [bold]{run.id}[/bold] (review) on {run.workspace}")
                run = await follow_run(client, run.id, console)
            _report(run, None, data_dir)

        run_command(main())


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    quiet_expected_failures()
    app()


if __name__ == "__main__":
    main()
