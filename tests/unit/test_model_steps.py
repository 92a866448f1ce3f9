"""`RunModelSteps` and its builders on their own: what a step's model call is sent, what a
compaction is asked, and where each call runs (local or regular) as the latencies come in."""

from __future__ import annotations

from keel.workflows.context.models import CompactionNeed
from keel.workflows.gate.gate import ToolGate
from keel.workflows.gate.models import GateResult
from keel.workflows.run.convergence import NextCall
from keel.workflows.run.model_steps import (
    RunModelSteps,
    after_compaction,
    compaction_input,
    llm_step_input,
)
from keel.workflows.run.models import RunInput, RunState, StartRunInput
from tests.integration.runs import agent


class Host:
    """The run's state, as the workflow would hold it (only what these methods read)."""

    def __init__(self) -> None:
        self._state = RunState()
        self._opening: StartRunInput | None = None

    def _take_seqs(self, count: int) -> int:
        first = self._state.next_seq
        self._state.next_seq += count
        return first


def run_input(**fields: object) -> RunInput:
    spec = agent().model_copy(update={"context_window": 32_000})
    return RunInput(
        run_id="run-1",
        agent=spec,
        model="m",
        session_id="s-1",
        **fields,  # type: ignore[arg-type]
    )


def test_a_forced_answer_offers_the_tools_but_lets_the_model_call_none() -> None:
    state = RunState(step=4)
    state.pending_results = [GateResult(step=3, ord=2, call_id="c", name="read_file", event_seq=1)]
    gate = ToolGate(["read_file", "list_files"])
    forced = NextCall(force_reason="max_steps", nudge="answer now")
    step = llm_step_input(run_input(), state, gate, forced, event_seq=7, start=None)
    assert (step.run_id, step.session_id, step.step, step.event_seq) == ("run-1", "s-1", 4, 7)
    assert step.tools == ["read_file", "list_files"] and step.tool_choice == "none"
    assert step.nudge == "answer now" and step.gate_results == state.pending_results
    assert step.context_window == 32_000 and not step.mcp and step.plugin_tools == []
    assert llm_step_input(run_input(), state, gate, NextCall(), event_seq=7, start=None) == (
        step.model_copy(update={"tool_choice": "auto", "nudge": None})
    )


def test_a_compacted_call_is_made_again_without_what_the_summary_now_holds() -> None:
    state = RunState(step=2)
    state.pending_results = [GateResult(step=1, ord=2, call_id="c", name="read_file", event_seq=1)]
    step = llm_step_input(
        run_input(), state, ToolGate(["read_file"]), NextCall(nudge="n"), event_seq=3, start=None
    )
    need = CompactionNeed(level=1, estimate=40_000, window=32_000)
    job = compaction_input(run_input(), step, need, event_seq=5)
    assert (job.step, job.tools, job.need, job.event_seq) == (2, ["read_file"], need, 5)
    assert (job.session_id, job.context_window) == ("s-1", 32_000)
    again = after_compaction(step)
    assert (again.gate_results, again.nudge, again.start) == ([], None, None)
    assert again.model_copy(update={"gate_results": step.gate_results, "nudge": "n"}) == step


def test_calls_run_local_only_while_the_model_stays_fast_and_within_the_budget() -> None:
    host = Host()
    steps = RunModelSteps(host, run_input(llm_local_below_ms=500, llm_local_budget_ms=1_000))
    assert not steps.runs_local()  # nothing known of the model yet
    assert RunModelSteps(host, run_input(fast_model=True)).runs_local()
    host._state.last_llm_ms = 400
    assert steps.runs_local()
    host._state.local_llm_ms = 700  # 700 + 400 would pass the budget
    assert not steps.runs_local()
    host._state.local_llm_ms = 0
    host._state.last_llm_ms = 500  # a slow call: the next is regular
    assert not steps.runs_local()
