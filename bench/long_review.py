"""Long reviews on a small window: what the context budget costs and what it saves.

Reviews generated workspaces (`bench.workspaces`) of about 0.5, 2 and 8 MB with the
built-in `review` agent and the scripted reviewer (`keel.worker.scripted.reviewer`), a model
that decides each call from what its request holds and delegates as the agent's prompt
says (parts of a workspace over 100 KB go to `explore` sub-agents), on a scripted server
that enforces a 32k-token window the way OpenAI's API does. `--no-subagents` reviews in
one conversation instead. For contrast, the smaller workspaces are also reviewed in one
conversation with the budget off on an unlimited window: every output stays in it.

    .venv/bin/python -m bench.long_review
    .venv/bin/python -m bench.long_review --sizes 0.5 2 --window 16384 --contrast 0.5
    .venv/bin/python -m bench.long_review --workspace .venv/lib/python3.11/site-packages/httpx
    .venv/bin/python -m bench.long_review --sizes 2 --no-subagents --contrast
    .venv/bin/python -m bench.long_review --sizes 2 --contrast --recent-share 0.4 --stale-at 0.3
    .venv/bin/python -m bench.long_review --sizes 0.5 2 --window 16384 --contrast --plain
    .venv/bin/python -m bench.long_review --sizes 0.5 --window 16384 --contrast --plain --no-plans

Per run, over the run and its sub-agents: total prompt tokens (as the server counts
them), the largest request, prompt tokens per KB of source, the ratio of prompt tokens
to the source's own tokens, the share of prompt tokens that repeat the previous
request's prefix in the same conversation (what a provider's prompt cache serves),
steps, compactions, children (sub-agent runs), files covered (read whole by some run of
the tree, from Keel's ledger, whoever planned the reading) and their share, the share of
planted findings in the report (in `runs.findings` and shown in the report's text), the
prompt tokens billed where a repeated prefix costs a tenth, over the source's tokens
(`((prompt - cached) + 0.1 * cached) / source`), refused requests, wall time and history
bytes a step. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

from temporalio.client import Client

from bench.step_overhead import DEFAULT_ADMIN_URL, BenchError, fresh_database
from bench.workspaces import GeneratedWorkspace, generate_workspace
from keel.activities.coverage import readers
from keel.activities.store.coverage_store import CoverageStore
from keel.activities.store.run_store import Store, StoreUnavailable
from keel.activities.store.run_tree import RunTreeStore
from keel.api.core.run_orders import as_started
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings, settings_from
from keel.worker.dev_stack import StackError, TemporalDevServer, free_port
from keel.worker.runtime import build_worker
from keel.worker.scripted.llm import Script, ScriptedLLMServer
from keel.worker.scripted.reviewer import CHARS_PER_TOKEN
from keel.worker.temporal_client import connect
from keel.workflows.context import budget as context_budget
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import AgentSpec, Limits
from keel.workflows.run.findings import FindingsRecord, extract_all, normal_path
from keel.workflows.run.models import RunInput

MODEL = "scripted"
PROMPT = "Review this project."
RUN_TIMEOUT_S = 1800.0
MB = 1_000_000
# A provider's prompt cache bills a repeated prefix at about a tenth of the price.
CACHED_PRICE = 0.1


@dataclass(frozen=True)
class Model:
    """How the scripted model reviews, and whether Keel plans the reading."""

    plain: bool = False
    plans: bool = True


@dataclass
class ReviewFigures:
    """One review, measured."""

    label: str
    source_bytes: int
    files: int
    prompt_tokens: int
    largest: int
    cached_share: float
    steps: int
    compactions: int
    children: int
    covered: int
    covered_pct: float
    cached_tokens: int
    # Planted findings in the report, as a share; None: the workspace has none planted.
    found_pct: float | None
    seconds: float
    history: int
    over_window: int

    @property
    def source_tokens(self) -> int:
        return self.source_bytes // CHARS_PER_TOKEN

    @property
    def billed(self) -> float:
        """Prompt tokens billed with the repeated prefix at `CACHED_PRICE`, over the source's."""
        fresh = self.prompt_tokens - self.cached_tokens
        return (fresh + CACHED_PRICE * self.cached_tokens) / max(1, self.source_tokens)

    def row(self) -> str:
        per_kb = self.prompt_tokens / (self.source_bytes / 1000)
        ratio = self.prompt_tokens / self.source_tokens
        found = "-" if self.found_pct is None else f"{self.found_pct:.0%}"
        return (
            f"{self.label:<28} {self.source_bytes / MB:>5.1f} {self.files:>5} "
            f"{self.prompt_tokens:>12,} {self.largest:>9,} {per_kb:>8.0f} {ratio:>6.2f} "
            f"{self.cached_share:>7.0%} {self.steps:>6} {self.compactions:>5} {self.children:>5} "
            f"{self.covered:>5} {self.covered_pct:>6.0%} {found:>6} {self.billed:>6.2f} "
            f"{self.over_window:>5} "
            f"{self.seconds:>7.1f} {self.history / max(1, self.steps):>8.0f}"
        )


HEADER = (
    f"{'run':<28} {'MB':>5} {'files':>5} {'prompt tok':>12} {'largest':>9} {'tok/KB':>8} "
    f"{'x src':>6} {'cached':>7} {'steps':>6} {'compa':>5} {'child':>5} {'cover':>5} {'cov %':>6} "
    f"{'find %':>6} {'billed':>6} {'over':>5} {'wall s':>7} {'hist B/st':>8}"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.long_review", description=__doc__)
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.5, 2.0, 8.0], help="MB")
    parser.add_argument("--window", type=int, default=32_768, help="tokens (default 32768)")
    parser.add_argument(
        "--contrast",
        type=float,
        nargs="*",
        default=[0.5, 2.0],
        help="sizes (MB) also reviewed with the budget off on an unlimited window",
    )
    parser.add_argument(
        "--no-subagents",
        action="store_true",
        help="review in one conversation: the review agent without its `task` tool",
    )
    parser.add_argument(
        "--recent-share",
        type=float,
        help="what-if: the share of the window kept for whole recent outputs (default 0.1)",
    )
    parser.add_argument(
        "--stale-at",
        type=float,
        help="what-if: compact once stubs and calls pass this share of the window (default 0.08)",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="a model that never delegates and never lists what it read (`plain_reviewer`)",
    )
    parser.add_argument(
        "--no-plans",
        action="store_true",
        help="leave the reading to the model: no coverage plan (KEEL_COVERAGE_PLANS=false)",
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        help="review this directory (e.g. a real project) instead of generated workspaces",
    )
    args = parser.parse_args(argv)
    # The budget's shares are constants of the activities, which run in this process.
    if args.recent_share is not None:
        context_budget.RECENT_SHARE = args.recent_share
    if args.stale_at is not None:
        context_budget.STALE_AT = args.stale_at
    if args.workspace is not None and not args.workspace.is_dir():
        parser.error(f"--workspace {args.workspace} is not a directory.")
    try:
        workspace = args.workspace.resolve() if args.workspace is not None else None
        model = Model(plain=args.plain, plans=not args.no_plans)
        asyncio.run(
            bench(args.sizes, args.window, args.contrast, workspace, not args.no_subagents, model)
        )
    except (BenchError, StackError, StoreUnavailable) as exc:
        raise SystemExit(f"long_review: {exc}") from None


async def bench(
    sizes: list[float],
    window: int,
    contrast: list[float],
    workspace: Path | None = None,
    subagents: bool = True,
    model: Model | None = None,
) -> None:
    model = model or Model()
    admin_url = Settings().database_url or DEFAULT_ADMIN_URL
    figures: list[ReviewFigures] = []
    with tempfile.TemporaryDirectory(prefix="keel-long-review-") as tmp:
        root = Path(tmp)
        temporal = TemporalDevServer(
            db_file=root / "temporal.sqlite", port=free_port(), log_file=root / "temporal.log"
        )
        await temporal.start()
        try:
            async with fresh_database(admin_url) as database_url:
                store = await Store.open(database_url)
                try:
                    await store.migrate()
                    client = await connect(temporal.address)
                    plans = [(size, True) for size in sizes]
                    plans += [(size, False) for size in contrast]
                    if workspace is not None:
                        plans = [(0.0, True)]
                    generated: dict[float, GeneratedWorkspace] = {}
                    for size, budget in plans:
                        ws_root = root / f"ws-{size:g}"
                        planted = None
                        if workspace is not None:
                            ws_root = workspace
                        else:
                            if size not in generated:
                                generated[size] = generate_workspace(
                                    ws_root, total_bytes=int(size * MB)
                                )
                            planted = generated[size].bugs
                        figures.append(
                            await review(
                                client,
                                store,
                                root,
                                ws_root,
                                temporal.address,
                                database_url,
                                window=window if budget else None,
                                budget=budget,
                                size=size,
                                # The contrast is the one conversation that never forgets.
                                subagents=subagents and budget,
                                model=model,
                                planted=planted,
                            )
                        )
                        print(figures[-1].row(), flush=True)
                finally:
                    await store.close()
        finally:
            await temporal.stop()
    print()
    print(HEADER)
    for figure in figures:
        print(figure.row())


async def review(
    client: Client,
    store: Store,
    root: Path,
    ws_root: Path,
    temporal_address: str,
    database_url: str,
    *,
    window: int | None,
    budget: bool,
    size: float,
    subagents: bool,
    model: Model,
    planted: dict[str, tuple[int, str]] | None = None,
) -> ReviewFigures:
    files, source_bytes = _source_files(ws_root)
    size = size or source_bytes / MB
    policy: Literal["reviewer", "plain_reviewer"] = "plain_reviewer" if model.plain else "reviewer"
    script = Script(name=MODEL, policy=policy, context_window=window)
    with ScriptedLLMServer(script) as llm:
        settings = settings_from(
            temporal_address=temporal_address,
            database_url=database_url,
            openai_base_url=llm.base_url,
            openai_api_key="bench-key",
            model=MODEL,
            model_context_window=window or 100_000_000,
            context_budget=budget,
            task_queue=f"keel-bench-{uuid.uuid4().hex[:8]}",
            data_dir=root / "data",
            workspace_root=ws_root,
            llm_max_attempts=2,
            coverage_plans=model.plans,
        )
        parts = build_worker(client, store, settings)
        run_id = f"run-long-{uuid.uuid4().hex[:10]}"
        try:
            async with parts.worker:
                started = time.perf_counter()
                run = RunInput(
                    run_id=run_id,
                    agent=review_agent(len(files), subagents=subagents, plans=model.plans),
                    input=PROMPT,
                    model=MODEL,
                    workspace=str(ws_root),
                    llm_max_attempts=settings.llm_max_attempts,
                )
                handle = await client.start_workflow(
                    AgentRunWorkflow.run,
                    await as_started(store, run),
                    id=run_id,
                    task_queue=settings.task_queue,
                    execution_timeout=timedelta(seconds=RUN_TIMEOUT_S),
                )
                result = await handle.result()
                seconds = time.perf_counter() - started
        finally:
            await parts.llm.close()
        if result.status != "completed":
            raise BenchError(f"The review of {size:g} MB did not complete: {result.error}")
        requests = llm.requests
    tree = await RunTreeStore(store.pool).subtree(run.tenant_id, run_id)
    rel = [str(p.relative_to(ws_root)) for p in files]
    events = [e for r in tree for e in await store.list_events(r.id, limit=100_000)]
    accepted = [r for r in requests if not r.rejected]
    total = sum(r.tokens for r in accepted)
    if not budget:
        mode = "budget off, unlimited"
    else:
        mode = f"window {window}" + ("" if subagents else ", one conversation")
    mode += ", plain" if model.plain else ""
    mode += ", Keel plans" if model.plans else ""
    # Keel's ledger (what the tree was shown, whole), whoever planned the reading.
    read = readers(await CoverageStore(store.pool).tree_views(run.tenant_id, run_id))
    covered = sum(1 for f in rel if f in read)
    cached = sum(r.prefix_tokens for r in accepted)
    found_pct = None
    if planted:
        found = in_report(planted, tree[0].report or "", tree[0].findings)
        found_pct = len(found) / len(planted)
    return ReviewFigures(
        label=f"{size:.1f} MB {mode}",
        source_bytes=source_bytes,
        files=len(files),
        prompt_tokens=total,
        largest=max((r.tokens for r in requests), default=0),
        cached_share=cached / max(1, total),
        cached_tokens=cached,
        found_pct=found_pct,
        steps=sum(r.steps for r in tree),
        compactions=sum(1 for e in events if e.type == "compaction"),
        children=len(tree) - 1,
        covered=covered,
        covered_pct=covered / max(1, len(files)),
        seconds=seconds,
        history=await tree_history_bytes(client, [r.id for r in tree]),
        over_window=sum(1 for r in requests if r.rejected),
    )


def in_report(
    planted: dict[str, tuple[int, str]], report: str, record: FindingsRecord | None
) -> set[str]:
    """The files whose planted finding is in the run's `findings` and shown in its report:
    a `findings` block of the text (Keel's section) or the model's `path:line`."""
    recorded = {(normal_path(f.file), f.line) for f in record.findings} if record else set()
    shown = {(normal_path(f.file), f.line) for block in extract_all(report) for f in block.findings}
    return {
        path
        for path, (line, _) in planted.items()
        if (path, line) in recorded and ((path, line) in shown or f"{path}:{line}:" in report)
    }


async def tree_history_bytes(client: Client, workflow_ids: list[str]) -> int:
    """History bytes of every execution of every run of a tree (continue-as-new included)."""
    total = 0
    for workflow_id in workflow_ids:
        async for execution in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
            handle = client.get_workflow_handle(workflow_id, run_id=execution.run_id)
            history = await handle.fetch_history()
            total += sum(event.ByteSize() for event in history.events)
    return total


def _source_files(root: Path) -> tuple[list[Path], int]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and _reviewable(p))
    return files, sum(p.stat().st_size for p in files)


def _reviewable(path: Path) -> bool:
    """What `list_files` lists too: not under caches or virtualenvs."""
    return not any(part in ("__pycache__", ".git", "node_modules", ".venv") for part in path.parts)


def review_agent(files: int, *, subagents: bool = True, plans: bool = True) -> AgentSpec:
    """The built-in review agent, with limits that let it read every file.

    Without sub-agents it has no `task` tool and reviews in one conversation.
    """
    spec = AgentCatalog.load().get("review")
    if spec is None:
        raise BenchError("The built-in `review` agent is missing; reinstall Keel.")
    limits = Limits(
        **{
            **spec.limits.model_dump(),
            "max_steps": files * 4 + 50,
            "max_tool_calls": files * 4 + 50,
        }
    )
    update: dict[str, object] = {"limits": limits, "coverage": "files" if plans else "model"}
    if not subagents:
        update["subagents"] = []
    return spec.model_copy(update=update)


if __name__ == "__main__":
    main()
