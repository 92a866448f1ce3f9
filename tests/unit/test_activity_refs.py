"""The activities the workflows reference are the ones the worker implements.

Workflows call activities through the protocols of `workflows.activity_refs`; the
classes in `activities/` subclass them. A name, an argument model or a result
model that drifts between the two would fail only at run time, in a workflow
task, so it fails here first. Updates, signals and queries are referenced by
their methods too, and keep the names running workflows know them by.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from temporalio import activity, workflow

from keel.activities.a2a.client import A2AClientActivities
from keel.activities.context import CompactionActivities
from keel.activities.coverage import CoverageActivities
from keel.activities.hooks import HookActivities
from keel.activities.interactions import InteractionActivities
from keel.activities.llm.step import LlmActivities
from keel.activities.memory.activities import MemoryActivities
from keel.activities.retention.activities import RetentionActivities
from keel.activities.router.activities import RouterActivities
from keel.activities.run_records import RunRecordActivities
from keel.activities.subagents import SubagentActivities
from keel.activities.tools.mcp_discovery import McpDiscoveryActivities
from keel.activities.tools.tool_activities import ToolActivities
from keel.activities.webhooks.delivery import WebhookActivities
from keel.workflows import activity_refs
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.step_models import LlmStepInput, LlmStepResult, ToolCallInput, ToolDigest
from keel.workflows.sessions.workflow import SessionWorkflow

IMPLEMENTATIONS: dict[type, type] = {
    activity_refs.LlmCalls: LlmActivities,
    activity_refs.AgentMemory: MemoryActivities,
    activity_refs.ContextCompaction: CompactionActivities,
    activity_refs.ToolCalls: ToolActivities,
    activity_refs.McpDiscovery: McpDiscoveryActivities,
    activity_refs.RunRecords: RunRecordActivities,
    activity_refs.InteractionRecords: InteractionActivities,
    activity_refs.WebhookDeliveries: WebhookActivities,
    activity_refs.A2ADelegation: A2AClientActivities,
    activity_refs.Subagents: SubagentActivities,
    activity_refs.Coverage: CoverageActivities,
    activity_refs.RetentionPurges: RetentionActivities,
    activity_refs.PluginHooks: HookActivities,
    activity_refs.Routing: RouterActivities,
}
WORKFLOWS = Path(__file__).parents[2] / "workflows"


def activity_name(fn: Any) -> str | None:
    """The name `@activity.defn` registered `fn` under, or None if it is no activity."""
    definition = getattr(fn, "__temporal_activity_definition", None)
    return None if definition is None else definition.name


def activities_of(cls: type) -> dict[str, Any]:
    """The activity methods a class defines or inherits, by attribute name."""
    return {
        attr: fn
        for attr, fn in inspect.getmembers(cls, inspect.isfunction)
        if activity_name(fn) is not None
    }


def signature(fn: Any) -> tuple[list[object], object]:
    """The argument models (without `self`) and the result model of a method."""
    hints = get_type_hints(fn)
    params = list(inspect.signature(fn).parameters)[1:]
    return [hints.get(p) for p in params], hints.get("return")


def drift(ref: type, impl: type) -> list[str]:
    """How `impl` differs from the reference `ref`; empty when they agree."""
    problems: list[str] = []
    declared = activities_of(ref)
    for attr, declared_fn in declared.items():
        fn = getattr(impl, attr, None)
        if fn is None or fn is declared_fn:
            problems.append(f"{impl.__name__} does not implement {attr}")
            continue
        if activity_name(fn) != activity_name(declared_fn):
            problems.append(
                f"{impl.__name__}.{attr} is registered as {activity_name(fn)!r}, "
                f"referenced as {activity_name(declared_fn)!r}"
            )
        if signature(fn) != signature(declared_fn):
            problems.append(
                f"{impl.__name__}.{attr} takes and returns {signature(fn)}, "
                f"referenced as {signature(declared_fn)}"
            )
    for attr in activities_of(impl).keys() - declared.keys():
        problems.append(f"{impl.__name__}.{attr} is an activity no reference declares")
    return problems


def test_every_reference_has_one_implementation_in_the_worker() -> None:
    declared = {getattr(activity_refs, name) for name in activity_refs.__all__}
    assert declared == set(IMPLEMENTATIONS)
    for ref, impl in IMPLEMENTATIONS.items():
        assert ref in impl.__mro__, f"{impl.__name__} does not subclass {ref.__name__}"
    names = [activity_name(fn) for ref in declared for fn in activities_of(ref).values()]
    assert len(names) == len(set(names)), "two references share an activity name"


@pytest.mark.parametrize("ref", list(IMPLEMENTATIONS), ids=lambda ref: ref.__name__)
def test_an_implementation_matches_its_reference(ref: type) -> None:
    assert drift(ref, IMPLEMENTATIONS[ref]) == []


class RenamedStep(activity_refs.LlmCalls):
    @activity.defn(name="llm_call")
    async def llm_step(self, step: LlmStepInput) -> LlmStepResult:
        return LlmStepResult()


class OtherResult(activity_refs.ToolCalls):
    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> LlmStepResult:  # type: ignore[override]
        return LlmStepResult()

    @activity.defn(name="run_mcp_tool")
    async def run_mcp_tool(self, call: LlmStepInput) -> ToolDigest:  # type: ignore[override]
        return ToolDigest()

    @activity.defn(name="run_plugin_tool")
    async def run_plugin_tool(self, call: ToolCallInput) -> ToolDigest:
        return ToolDigest()


class Missing(activity_refs.ToolCalls):
    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolDigest:
        return ToolDigest()

    @activity.defn(name="run_shell")
    async def run_shell(self, call: ToolCallInput) -> ToolDigest:
        return ToolDigest()

    @activity.defn(name="run_plugin_tool")
    async def run_plugin_tool(self, call: ToolCallInput) -> ToolDigest:
        return ToolDigest()


def test_drift_is_caught() -> None:
    assert drift(activity_refs.LlmCalls, RenamedStep) == [
        "RenamedStep.llm_step is registered as 'llm_call', referenced as 'llm_step'"
    ]
    assert [p.split(" takes")[0] for p in drift(activity_refs.ToolCalls, OtherResult)] == [
        "OtherResult.run_mcp_tool",
        "OtherResult.run_tool",
    ]
    assert drift(activity_refs.ToolCalls, Missing) == [
        "Missing does not implement run_mcp_tool",
        "Missing.run_shell is an activity no reference declares",
    ]


def test_workflows_call_activities_by_reference_only() -> None:
    """No string names: every activity call goes through `run_activity`."""
    calls: list[str] = []
    for path in sorted(WORKFLOWS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = node.func.attr
                spelled = bool(node.args) and isinstance(node.args[0], ast.Constant)
                if name.startswith("execute_") and "activity" in name:
                    calls.append(f"{path.name} {name}")
                elif name.endswith("child_workflow") and spelled:
                    calls.append(f"{path.name}:{node.lineno} {name} by name")
    assert sorted(calls) == [
        "activity_call.py execute_activity_method",
        "activity_call.py execute_local_activity_method",
    ]


@pytest.mark.parametrize(
    ("workflow_class", "updates", "signals", "queries"),
    [
        (
            AgentRunWorkflow,
            {"decide"},
            {"resolve_interaction", "child_status", "grants_changed"},
            {"progress", "interactions"},
        ),
        (SessionWorkflow, {"submit", "withdraw"}, set(), {"state"}),
    ],
    ids=["agent-run", "session"],
)
def test_workflow_handlers_keep_their_names_on_the_wire(
    workflow_class: type, updates: set[str], signals: set[str], queries: set[str]
) -> None:
    """The API references handlers by method; running workflows know them by name."""
    definition = workflow._Definition.must_from_class(workflow_class)
    assert set(definition.updates) == updates
    assert set(definition.signals) == signals
    assert set(definition.queries) == queries
