"""Sub-agents in pure code: agent files that name them, the `task` gate, shares of limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keel.worker.agent_catalog import AgentCatalog, AgentDefinitionError
from keel.workflows.gate.gate import ToolGate
from keel.workflows.gate.tool_specs import TOOL_SPECS
from keel.workflows.run import subagents
from keel.workflows.run.agent_spec import Limits
from keel.workflows.run.models import RunState
from keel.workflows.run.subagent_models import SubagentTask
from keel.workflows.usage.models import Usage
from tests.unit.test_agent_catalog import agent_file

# -- agent files -----------------------------------------------------------------------


def test_an_agent_lists_its_sub_agents_and_its_model_is_told_about_them(tmp_path: Path) -> None:
    (tmp_path / "lead.md").write_text(agent_file("lead", extra="subagents: [explore, mine]\n"))
    (tmp_path / "mine.md").write_text(agent_file("mine"))
    lead = AgentCatalog.load(tmp_path).get("lead")
    assert lead is not None and lead.subagents == ["explore", "mine"]
    assert "## Sub-agents" in lead.system_prompt
    assert "- `mine`: A test agent." in lead.system_prompt
    assert "- `explore`: Read-only explorer" in lead.system_prompt


def test_an_unknown_sub_agent_is_refused_at_load_naming_the_file_and_field(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lead.md"
    path.write_text(agent_file("lead", extra="subagents: [explore, nobody]\n"))
    with pytest.raises(AgentDefinitionError) as caught:
        AgentCatalog.load(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{path}: subagents: unknown agents ['nobody']")
    assert "known agents:" in message


@pytest.mark.parametrize(
    ("front_matter", "expected"),
    [
        ("tools: [read_file, task]\n", "list them in `subagents`"),
        ("subagents: [explore, explore]\n", "repeated: ['explore']"),
    ],
    ids=["task-without-subagents", "repeated"],
)
def test_malformed_sub_agent_fields_are_refused(
    tmp_path: Path, front_matter: str, expected: str
) -> None:
    path = tmp_path / "lead.md"
    path.write_text(f"---\nname: lead\n{front_matter}---\nYou lead.\n")
    with pytest.raises(AgentDefinitionError) as caught:
        AgentCatalog.load(tmp_path)
    assert str(caught.value).startswith(f"{path}: ") and expected in str(caught.value)


def test_the_review_agent_may_delegate_to_explore() -> None:
    review = AgentCatalog.load().get("review")
    assert review is not None and review.subagents == ["explore"]


# -- the gate --------------------------------------------------------------------------


def call(name: str, arguments: dict[str, object]) -> object:
    from keel.workflows.run.step_models import ToolCallRequest

    return ToolCallRequest(call_id="c1", name=name, arguments=json.dumps(arguments))


def test_task_is_offered_only_to_agents_with_sub_agents() -> None:
    assert "task" not in ToolGate(["read_file", "task"]).tool_names
    assert ToolGate(["read_file"], subagents=["explore"]).tool_names == ["read_file", "task"]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"agent": "build", "prompt": "do it"}, "'build' is not a sub-agent this agent may run"),
        ({"agent": "explore"}, "invalid arguments for task: prompt: Field required"),
        ({"agent": "explore", "prompt": ""}, "prompt: String should have at least 1 character"),
        ({"agent": "explore", "prompt": "x", "extra": 1}, "extra: Extra inputs"),
    ],
    ids=["not-allowed", "no-prompt", "empty-prompt", "unknown-key"],
)
def test_bad_task_calls_are_errors_the_model_can_correct(
    arguments: dict[str, object], expected: str
) -> None:
    gate = ToolGate(["read_file"], subagents=["explore"])
    decision = gate.check(call("task", arguments), {})  # type: ignore[arg-type]
    assert decision.verdict == "error" and expected in decision.message


def test_a_task_call_runs_through_the_rules_like_any_tool() -> None:
    from keel.workflows.gate.permissions import PermissionRule

    rules = [PermissionRule(permission="task", pattern="build", action="ask")]
    gate = ToolGate([], rules, subagents=["explore", "build"])
    ok = gate.check(call("task", {"agent": "explore", "prompt": "look"}), {})  # type: ignore[arg-type]
    asks = gate.check(call("task", {"agent": "build", "prompt": "change"}), {})  # type: ignore[arg-type]
    assert ok.verdict == "run" and asks.verdict == "ask" and asks.subject == "build"
    assert TOOL_SPECS["task"].risk == "read"


# -- shares of the parent's limits -----------------------------------------------------


def test_children_share_what_the_parent_has_left() -> None:
    state = RunState(tool_calls=10, subagent_tool_calls=30, usage=Usage(prompt_tokens=40_000))
    parent = Limits(max_tool_calls=100, max_total_tokens=100_000)
    assert subagents.share_of(parent, state, 3) == (20, 20_000, None)
    assert subagents.share_of(Limits(max_tool_calls=100), state, 2) == (30, None, None)
    # Nothing left still lets a child answer.
    assert subagents.share_of(Limits(max_tool_calls=10), state, 4) == (1, None, None)


def test_children_share_what_is_left_of_a_cost_ceiling() -> None:
    state = RunState(usage=Usage(prompt_tokens=40_000, cost_usd=0.4))
    share = subagents.share_of(Limits(max_tool_calls=100, max_cost_usd=1.0), state, 3)
    assert share.max_cost_usd == pytest.approx(0.2)
    # Overspent (its children's calls count): a child still gets enough to answer once.
    broke = RunState(usage=Usage(cost_usd=1.5))
    share = subagents.share_of(Limits(max_cost_usd=1.0), broke, 2)
    assert share.max_cost_usd == subagents.MIN_COST_SHARE_USD
    own = Limits(max_cost_usd=0.1)
    task = SubagentTask(step=1, ord=2, event_seq=5, max_tool_calls=5, max_cost_usd=0.3)
    assert subagents.within_share(own, task).max_cost_usd == 0.1
    assert subagents.within_share(Limits(), task).max_cost_usd == 0.3


def test_a_child_keeps_its_own_limits_within_its_share() -> None:
    own = Limits(max_steps=12, max_tool_calls=40, max_total_tokens=None)
    task = SubagentTask(step=1, ord=2, event_seq=5, max_tool_calls=25, max_total_tokens=9_000)
    within = subagents.within_share(own, task)
    assert (within.max_steps, within.max_tool_calls, within.max_total_tokens) == (12, 25, 9_000)
    roomy = SubagentTask(step=1, ord=2, event_seq=5, max_tool_calls=500)
    assert subagents.within_share(own, roomy).max_tool_calls == 40


def test_a_childs_ids_derive_from_its_parents_call() -> None:
    assert subagents.child_run_id("run-1", 3, 2) == "run-1-task-3-2"
    assert subagents.interaction_id("run-1-task-3-2", "run-1", 1, 2) == "run-1-task-3-2:ia-1-2"
    assert subagents.interaction_id("run-1", None, 1, 2) == "ia-1-2"
