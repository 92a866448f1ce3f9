"""What the router reads: agent files' `roles:`, and the scripted model's routing answers."""

from __future__ import annotations

import json

import pytest

from keel.activities.router.activities import classification_messages, parse_answer
from keel.worker.agent_catalog import AgentDefinitionError, parse_agent
from keel.worker.scripted.router import MALFORMED_MARK, asks_for_route, route_reply
from keel.workflows.router.models import Clarification
from keel.workflows.run.agent_spec import AgentSpec

AGENTS = [
    AgentSpec(name="review", description="Reviews the code of a workspace."),
    AgentSpec(name="investigate", description="Investigates a question about a codebase."),
    AgentSpec(name="build", description="Makes changes to a workspace and runs commands."),
]


def reply(request: str, *answers: str) -> dict[str, object]:
    clarifications = [Clarification(question="Which?", answer=a) for a in answers]
    messages = classification_messages(AGENTS, request, clarifications)
    assert asks_for_route(messages)
    return dict(json.loads(route_reply(messages)))


def test_roles_are_read_and_auto_is_reserved() -> None:
    spec = parse_agent("---\nname: ops\nroles: [sre, admin]\n---\nYou operate.\n", "ops.md")
    assert spec.roles == ["sre", "admin"]
    assert parse_agent("---\nname: open\n---\nYou help.\n", "open.md").roles == []
    with pytest.raises(AgentDefinitionError, match="'auto' is the router's name"):
        parse_agent("---\nname: auto\n---\nYou route.\n", "auto.md")


@pytest.mark.parametrize(
    ("request_text", "agent"),
    [
        ("Please review the code for bugs.", "review"),
        ("Investigate why the parser fails.", "investigate"),
        ("Ask the build agent to add a flag.", "build"),
        ("Use the deploy agent now.", "deploy"),  # named, though not offered
    ],
)
def test_the_scripted_model_picks_by_name_or_by_words(request_text: str, agent: str) -> None:
    answer = reply(request_text)
    assert answer["agent"] == agent and answer["question"] is None
    assert 0.5 <= float(str(answer["confidence"])) <= 0.95


def test_unclear_ties_and_malformed_requests() -> None:
    unclear = reply("Can you help me please?")
    assert unclear["agent"] is None and "I can route to" in str(unclear["question"])
    tie = reply("The workspace.")  # review and build both mention a workspace
    assert tie["agent"] is None and "build or review" in str(tie["question"])
    messages = classification_messages(AGENTS, f"{MALFORMED_MARK} review it", [])
    assert parse_answer(route_reply(messages)).kind == "malformed"
    # After a question, the latest answer is what is classified.
    assert reply(f"{MALFORMED_MARK} review it", "Investigate the parser.")["agent"] == (
        "investigate"
    )


def test_other_requests_are_not_routing_requests() -> None:
    assert not asks_for_route([{"role": "system", "content": "You review code."}])
    assert not asks_for_route([])
