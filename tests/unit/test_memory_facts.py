"""Memory's pure parts: where a proposed fact goes, and which facts are never stored."""

from __future__ import annotations

import pytest

from keel.activities.memory.activities import placed, recall_note
from keel.activities.memory.dedupe import Candidate, KnownMemory, fact_hash, place
from keel.activities.memory.extraction import FactsAnswerInvalid, parse_facts
from keel.activities.memory.redaction import withhold_secrets
from keel.worker.scripted.memory import embed, facts_reply

TABS = KnownMemory(
    id="mem-1",
    fact="The user prefers tabs for indentation.",
    kind="preference",
    topic="indentation",
)
NAME = KnownMemory(id="mem-2", fact="The user's name is Alice.", kind="name", topic="name")


def test_the_same_fact_restated_is_a_duplicate() -> None:
    again = Candidate(fact="the user prefers  tabs for indentation", kind="preference")
    assert place(again, [NAME, TABS]).action == "duplicate"
    assert place(again, [NAME, TABS]).memory_id == "mem-1"
    assert fact_hash("A fact.") == fact_hash("  a   FACT ")


def test_a_fact_on_the_same_topic_updates_the_memory() -> None:
    spaces = Candidate(
        fact="The user prefers spaces for indentation.", kind="preference", topic="Indentation"
    )
    assert place(spaces, [NAME, TABS]).action == "update"
    assert place(spaces, [NAME, TABS]).memory_id == "mem-1"
    # The topic binds within a kind only: a decision on indentation is another fact.
    decision = Candidate(fact="We use four spaces.", kind="decision", topic="indentation")
    assert place(decision, [TABS]).action == "insert"


def test_without_a_topic_close_wording_updates_and_other_wording_inserts() -> None:
    close = Candidate(fact="User prefers tab indentation", kind="preference")
    assert place(close, [TABS]).action == "update"
    other = Candidate(fact="The user deploys on Fridays.", kind="other")
    assert place(other, [NAME, TABS]).action == "insert"


def test_embeddings_decide_where_both_have_one() -> None:
    known = KnownMemory(
        id="mem-3", fact="Dark mode everywhere", kind="preference", embedding=(1.0, 0.0)
    )
    near = Candidate(fact="Completely different words", kind="preference", embedding=(0.99, 0.1))
    far = Candidate(fact="Dark mode everywhere please", kind="preference", embedding=(0.0, 1.0))
    assert place(near, [known]).action == "update"
    assert place(far, [known]).action == "insert"


def test_facts_of_one_answer_are_placed_among_each_other_too() -> None:
    facts = placed(
        [
            Candidate(fact="The user's name is Bob.", kind="name", topic="name"),
            Candidate(fact="The user's name is Bob.", kind="name", topic="name"),
            Candidate(fact="The user prefers vim.", kind="preference", topic="editor"),
        ],
        [NAME],
    )
    assert [(f.fact, f.replaces) for f in facts] == [
        ("The user's name is Bob.", "mem-2"),
        ("The user prefers vim.", None),
    ]


@pytest.mark.parametrize(
    "fact",
    [
        "My password is hunter2.",
        "The staging password for the db is Winter2026",
        "The user's API key: abc123def",
        "Remember the api-key = 12345",
        "The user's token is ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "Use sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345 for the OpenAI calls.",
        "Deploy with Bearer abcdefghijklmnop1234",
        "The database is postgres://app:s3cret@db.internal/app",
        "Their access key is AKIAIOSFODNN7EXAMPLE.",
        "The user's pin is 4711.",
    ],
)
def test_a_fact_that_holds_or_states_a_secret_is_withheld(fact: str) -> None:
    assert withhold_secrets(fact) is None


@pytest.mark.parametrize(
    "fact",
    [
        "The user prefers tabs for indentation.",
        "The user decided to use a password manager for the team.",
        "The user's name is Alice.",
        "The user reviews tokens of the lexer first.",
        "The team rotates secrets every quarter.",
    ],
)
def test_an_ordinary_fact_is_kept(fact: str) -> None:
    assert withhold_secrets(fact) == fact


def test_the_answer_is_checked_against_its_schema() -> None:
    ok = parse_facts(
        '{"facts": [{"fact": "The user likes tea.", "kind": "preference", "topic": "tea"}]}'
    )
    assert ok.facts[0].topic == "tea"
    for bad in [
        '{"facts": [{"fact": "x y z", "kind": "mood", "topic": ""}]}',
        "not json",
        '{"facts": 3}',
    ]:
        with pytest.raises(FactsAnswerInvalid):
            parse_facts(bad)


def test_the_scripted_model_states_what_the_user_said() -> None:
    reply = facts_reply(
        [
            {"role": "system", "content": "..."},
            {
                "role": "user",
                "content": "USER: My name is Dana.\nI prefer tabs for indentation.\n\n"
                "ASSISTANT: I prefer nothing.\nWe decided nothing.",
            },
        ]
    )
    facts = parse_facts(reply).facts
    assert [(f.fact, f.kind, f.topic) for f in facts] == [
        ("The user's name is Dana.", "name", "name"),
        ("The user prefers tabs for indentation.", "preference", "indentation"),
    ]


def test_scripted_embeddings_are_unit_vectors_that_follow_shared_words() -> None:
    a, b, c = embed("tabs for indentation"), embed("indentation with tabs"), embed("deploy fridays")
    assert sum(x * x for x in a) == pytest.approx(1.0)
    assert sum(x * y for x, y in zip(a, b, strict=True)) == pytest.approx(1.0)
    assert abs(sum(x * y for x, y in zip(a, c, strict=True))) < 0.5


def test_the_recall_note_names_each_memory_and_its_source() -> None:
    from datetime import UTC, datetime

    from keel.activities.store.memory_store import Memory

    when = datetime(2026, 11, 24, 9, 30, tzinfo=UTC)
    note = recall_note(
        [
            Memory(
                id="mem-1",
                tenant_id="acme",
                user_id="alice",
                fact="The user prefers tabs.",
                kind="preference",
                topic="tabs",
                source_run_id="run-1",
                source_session_id="s-1",
                created_at=when,
                updated_at=when,
            )
        ]
    )
    assert (
        note.splitlines()[1]
        == "- [mem-1] The user prefers tabs. (session s-1, run run-1, 2026-11-24)"
    )


def test_memory_is_opt_in_per_agent_file() -> None:
    from keel.worker.agent_catalog import AgentCatalog, AgentDefinitionError, parse_agent

    head = "---\nname: helper\n{}---\nHelp.\n"
    assert parse_agent(head.format("memory: true\n"), "helper.md").memory is True
    assert parse_agent(head.format(""), "helper.md").memory is False
    with pytest.raises(AgentDefinitionError, match="memory"):
        parse_agent(head.format("memory: sometimes\n"), "helper.md")
    assert not any(spec.memory for spec in AgentCatalog.load().all())


def test_embeddings_are_read_as_floats_or_base64() -> None:
    import base64
    import struct

    from keel.activities.memory.activities import _floats

    packed = base64.b64encode(struct.pack("<3f", 0.5, -1.0, 0.25)).decode()
    assert _floats(packed) == [0.5, -1.0, 0.25]
    assert _floats([1, 0.5]) == [1.0, 0.5]
