"""`RunInteractions` on its own: who may decide, what a grant covers, which decisions
cannot take, and what the model is told."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from keel.workflows.gate.models import MessageRef
from keel.workflows.interactions.models import Interaction, InteractionDecision
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.agent_spec import ApprovalPolicy
from keel.workflows.run.hooks import RunHooks
from keel.workflows.run.interactions import RunInteractions, _interaction_answer
from keel.workflows.run.models import RunInput, RunState
from keel.workflows.run.notices import RunNotices
from keel.workflows.run.subagent_runs import RunSubagents
from keel.workflows.run.tool_calls import RunToolCalls
from tests.integration.runs import agent

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Host:
    """The run's state, as the workflow would hold it (only what these methods read)."""

    def __init__(self) -> None:
        self._state = RunState()
        self._ids = RunInput(agent=agent(), requester="user:alice")
        self._gate = None

    def _take_seqs(self, count: int) -> int:
        first = self._state.next_seq
        self._state.next_seq += count
        return first


def interaction(**fields: object) -> Interaction:
    values: dict[str, object] = {
        "id": "run-1:1:2",
        "kind": "confirm",
        "step": 1,
        "ord": 2,
        "call_id": "c1",
        "tool": "bash",
        "arguments": '{"command":"ls"}',
        "payload_hash": "h" * 64,
        "risk": "exec",
        "subject": "ls *.py",
        "requester": "user:alice",
        "approvers": ["user:alice"],
        "created_at": NOW,
        "expires_at": NOW + timedelta(hours=1),
    }
    values.update(fields)
    return Interaction.model_validate(values)


def run_input(policy: ApprovalPolicy, approver: str | None = None) -> RunInput:
    spec = agent().model_copy(update={"approval": policy})
    return RunInput(agent=spec, requester="user:alice", approver=approver)


def collaborator() -> tuple[RunInteractions, Host]:
    host = Host()
    hooks = RunHooks(host)
    children = RunSubagents(host, AgentRunWorkflow.run, AgentRunWorkflow.child_status)
    tools = RunToolCalls(host, hooks)
    return RunInteractions(host, hooks, RunNotices(host), children, tools), host  # type: ignore[arg-type]


def test_approvers_leave_out_the_requester_where_the_policy_says_so() -> None:
    interactions, _ = collaborator()
    policy = ApprovalPolicy(approver="user:bob", no_self_approval=["exec"])
    assert interactions.approvers(run_input(policy), "exec") == ["user:bob"]
    assert interactions.approvers(run_input(policy), "read") == ["user:alice", "user:bob"]
    assert interactions.approvers(run_input(policy, approver="user:carol"), "exec") == [
        "user:carol"
    ]


def test_approve_always_grants_exactly_the_subject_even_with_glob_characters() -> None:
    rule = RunInteractions.always_rule(interaction(subject="rm *.py [x]?"))
    assert (rule.permission, rule.action) == ("bash", "allow")
    assert rule.pattern == "rm [*].py [[]x][?]"


def test_decisions_on_unknown_or_closed_interactions_are_refused_with_their_reason() -> None:
    interactions, host = collaborator()
    missing = InteractionDecision(interaction_id="nope", decision="approve", approver="user:alice")
    assert interactions.problem_with(missing) == (
        "InteractionNotFound",
        "No interaction nope in this run.",
    )
    closed = interaction(status="rejected")
    host._state.interactions[closed.id] = closed
    decision = missing.model_copy(update={"interaction_id": closed.id})
    assert interactions.problem_with(decision) == (
        "InteractionClosed",
        f"Interaction {closed.id} is already resolved.",
    )
    expired = interaction(id="run-1:1:3", ord=3, status="expired")
    host._state.interactions[expired.id] = expired
    problem = interactions.problem_with(decision.model_copy(update={"interaction_id": expired.id}))
    assert problem is not None and problem[1].endswith("already expired.")


def test_a_request_delivered_again_recognises_itself_by_decision_id() -> None:
    interactions, host = collaborator()
    stored = interaction(status="approved", decision="approve", decision_id="d-1")
    host._state.interactions[stored.id] = stored
    again = InteractionDecision(
        interaction_id=stored.id, decision="approve", approver="user:alice", decision_id="d-1"
    )
    assert interactions.took(again) is stored
    assert interactions.took(again.model_copy(update={"decision_id": "d-2"})) is None
    assert interactions.took(again.model_copy(update={"decision_id": None})) is None


def test_only_an_expired_request_may_be_asked_again() -> None:
    interactions, host = collaborator()
    host._state.interactions["a"] = interaction(id="a", step=1, ord=2, status="expired")
    host._state.interactions["b"] = interaction(id="b", step=1, ord=3, status="rejected")
    assert not interactions.answer_is_final(MessageRef(step=1, ord=2))
    assert interactions.answer_is_final(MessageRef(step=1, ord=3))
    assert interactions.answer_is_final(MessageRef(step=2, ord=2))


def test_the_model_is_told_why_a_call_did_not_run() -> None:
    rejected = interaction(status="rejected", answer="wrong directory")
    assert _interaction_answer(rejected) == (
        "Error: the user rejected this bash call; it did not run. Reason: wrong directory "
        "Do not repeat it unchanged."
    )
    assert "before it expired" in _interaction_answer(interaction(status="expired"))
