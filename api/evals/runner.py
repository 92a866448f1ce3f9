"""Running scenarios: each attempt is an ordinary durable run started through Keel's API
(the same client the CLI uses), decided as the scenario says, then checked.

Attempts run in parallel, at most `concurrency` at once; each works on its own fresh
copy of the scenario's workspace, so an agent that writes cannot disturb another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path

import httpx

from keel.api.cli.client import KeelApiError, KeelClient
from keel.api.core.schemas.interactions import InteractionDecisionCreate, InteractionPublic
from keel.api.core.schemas.runs import RunChildPublic, RunCreate, RunPublic
from keel.api.evals.expectations import Finding, Observation, ToolCallSeen, check
from keel.api.evals.results import AttemptResult, EvalReport, ScenarioResult
from keel.api.evals.scenario import Decision, Scenario

__all__ = ["EvalRunner", "OnResult", "match_decision", "model_names"]

ACTIVE = ("queued", "running", "waiting")
POLL_INTERVAL_S = 0.25
# After a cancel, how long the run may take to say it ended.
CANCEL_GRACE_S = 30.0

OnResult = Callable[[Scenario, AttemptResult], None]


def model_names(scenarios: list[Scenario]) -> dict[str, str | None]:
    """The model each scenario's runs ask for: its own name on the scripted server
    (`eval-N-NAME`), the named configured model, or None for the configured default."""
    names: dict[str, str | None] = {}
    for i, scenario in enumerate(scenarios, start=1):
        names[scenario.name] = (
            f"eval-{i}-{scenario.slug}" if scenario.scripted else scenario.model.name
        )
    return names


def match_decision(decisions: list[Decision], ia: InteractionPublic) -> Decision | None:
    """The first rule of the scenario that matches what the run asks."""
    for rule in decisions:
        if rule.tool is not None and rule.tool not in (ia.tool, ia.kind):
            continue
        if rule.subject is not None and not fnmatchcase(ia.subject, rule.subject):
            continue
        return rule
    return None


def _describe_request(ia: InteractionPublic) -> str:
    if ia.kind == "ask_user":
        return f"the question {ia.question!r}"
    return f"approval of {ia.tool} {ia.subject!r}"


def _arguments(raw: object) -> dict[str, object]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _child_ids(children: list[RunChildPublic]) -> list[str]:
    return [i for c in children for i in (c.id, *_child_ids(c.children))]


def _structured_findings(run: RunPublic) -> list[Finding] | None:
    """The run's structured findings (its report's `findings` block, docs/findings.md);
    None without a valid block, so the report's prose is read instead."""
    if run.findings is None:
        return None
    return [Finding(file=f.file, severity=f.severity) for f in run.findings]


class EvalRunner:
    """Runs scenarios against one Keel through its HTTP API."""

    def __init__(
        self,
        client: KeelClient,
        work_dir: Path,
        *,
        concurrency: int = 4,
        on_result: OnResult | None = None,
    ) -> None:
        self._client = client
        self._work_dir = work_dir
        self._slots = asyncio.Semaphore(concurrency)
        self._on_result = on_result

    async def run(
        self,
        scenarios: list[Scenario],
        models: dict[str, str | None],
        *,
        repeat: int = 1,
        min_pass_rate: float = 1.0,
    ) -> EvalReport:
        """Every scenario `repeat` times; the report keeps the scenarios' order."""
        started = datetime.now(UTC)
        plan = [(s, n) for s in scenarios for n in range(1, repeat + 1)]
        results = await asyncio.gather(*(self._guarded(s, n, models.get(s.name)) for s, n in plan))
        done: dict[str, list[AttemptResult]] = {s.name: [] for s in scenarios}
        for (scenario, _), result in zip(plan, results, strict=True):
            done[scenario.name].append(result)
        return EvalReport(
            started_at=started,
            finished_at=datetime.now(UTC),
            repeat=repeat,
            min_pass_rate=min_pass_rate,
            scenarios=[
                ScenarioResult(
                    name=s.name, file=str(s.source), agent=s.agent, attempts=done[s.name]
                )
                for s in scenarios
            ],
        )

    async def _guarded(self, scenario: Scenario, attempt: int, model: str | None) -> AttemptResult:
        async with self._slots:
            try:
                result = await self.attempt(scenario, attempt, model)
            except (KeelApiError, httpx.HTTPError) as exc:
                result = AttemptResult(
                    attempt=attempt, run_id=None, passed=False, failures=[f"keel: {exc}"]
                )
        if self._on_result is not None:
            self._on_result(scenario, result)
        return result

    def _workspace(self, scenario: Scenario, attempt: int) -> Path:
        """A fresh copy of the scenario's workspace for one attempt."""
        root = self._work_dir / f"{scenario.slug}-{attempt}-{uuid.uuid4().hex[:6]}"
        source = scenario.workspace_dir()
        if source is not None:
            shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__"))
        root.mkdir(parents=True, exist_ok=True)
        for relative, content in scenario.workspace.files.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        return root

    async def attempt(self, scenario: Scenario, attempt: int, model: str | None) -> AttemptResult:
        """Run the scenario once and check what the run did."""
        workspace = await asyncio.to_thread(self._workspace, scenario, attempt)
        body = RunCreate(
            agent=scenario.agent,
            input=scenario.input,
            workspace=str(workspace),
            trigger="cli",
            model=model,
            run_id=f"eval-{scenario.slug}-{attempt}-{uuid.uuid4().hex[:8]}",
            metadata={"eval_scenario": scenario.name, "eval_attempt": str(attempt)},
        )
        run = await self._client.create_run(body)
        try:
            run, problems = await self._drive(scenario, run)
        except (KeelApiError, httpx.HTTPError) as exc:
            # A run the eval can no longer follow must not go on working unwatched.
            run, problems = await self._cancelled(run), [f"keel: {exc}"]
        seen = await self._observe(run)
        failures = problems + check(scenario.expect, seen, workspace)
        return AttemptResult(
            attempt=attempt,
            run_id=run.id,
            passed=not failures,
            failures=failures,
            status=seen.status,
            stop_reason=seen.stop_reason,
            steps=seen.steps,
            tool_calls=seen.tool_calls,
            tokens=seen.tokens,
            cost_usd=seen.cost_usd,
            duration_s=seen.duration_s,
        )

    async def _drive(self, scenario: Scenario, run: RunPublic) -> tuple[RunPublic, list[str]]:
        """Answer what the run asks until it ends; cancel it if it outlives the timeout
        or asks something the scenario has no decision for."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + scenario.timeout_s
        decided: set[str] = set()
        while run.status in ACTIVE:
            for interaction_id in run.pending_interactions:
                if interaction_id in decided:
                    continue
                problem = await self._decide(scenario, run.id, interaction_id)
                if problem is not None:
                    return await self._cancelled(run), [problem]
                decided.add(interaction_id)
            if loop.time() > deadline:
                problem = f"timeout_s: still {run.status} after {scenario.timeout_s:g} s; cancelled"
                return await self._cancelled(run), [problem]
            await asyncio.sleep(POLL_INTERVAL_S)
            run = await self._client.get_run(run.id)
        return run, []

    async def _decide(self, scenario: Scenario, run_id: str, interaction_id: str) -> str | None:
        """Give the scenario's decision; a sentence when it has none for this request."""
        ia = await self._client.interaction(run_id, interaction_id)
        if ia.status != "pending":
            return None
        rule = match_decision(scenario.decisions, ia)
        if rule is None:
            return (
                f"decisions: the run asked for {_describe_request(ia)} and no decision "
                "matches it; the run was cancelled"
            )
        approving = rule.decision.startswith("approve")
        body = InteractionDecisionCreate(
            decision=rule.decision,
            payload_hash=ia.payload_hash if approving else None,
            text=rule.text,
        )
        await self._client.decide(run_id, interaction_id, body)
        return None

    async def _cancelled(self, run: RunPublic) -> RunPublic:
        """Cancel the run and wait (a while) until it says it ended; a run that ended by
        itself meanwhile refuses the cancel, which is fine."""
        with contextlib.suppress(KeelApiError):
            await self._client.cancel(run.id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_GRACE_S
        while loop.time() < deadline:
            run = await self._client.get_run(run.id)
            if run.status not in ACTIVE:
                break
            await asyncio.sleep(POLL_INTERVAL_S)
        return run

    async def _events(self, run_id: str) -> list[ToolCallSeen]:
        """The run's tool calls with their outcomes, from its durable events."""
        calls: dict[str, ToolCallSeen] = {}
        after = 0
        while True:
            page = await self._client.events(run_id, after)
            if not page.events:
                break
            for event in page.events:
                call_id = str(event.data.get("call_id", ""))
                if event.type == "tool_call":
                    calls[call_id] = ToolCallSeen(
                        run_id=run_id,
                        name=str(event.data.get("name", "")),
                        arguments=_arguments(event.data.get("arguments")),
                    )
                elif event.type == "tool_result" and call_id in calls:
                    calls[call_id].ok = not event.data.get("is_error")
            after = page.next_after
        return list(calls.values())

    async def _observe(self, run: RunPublic) -> Observation:
        calls: list[ToolCallSeen] = []
        for run_id in (run.id, *_child_ids(run.children)):
            calls += await self._events(run_id)
        usage = run.total_usage or run.usage
        end = run.finished_at or datetime.now(UTC)
        return Observation(
            run_id=run.id,
            status=run.status,
            stop_reason=run.stop_reason,
            error=run.error,
            steps=run.steps,
            tool_calls=run.tool_calls,
            tokens=usage.total_tokens,
            cost_usd=usage.cost_usd,
            duration_s=max((end - run.created_at).total_seconds(), 0.0),
            report=run.report or "",
            calls=calls,
            findings=_structured_findings(run),
        )
