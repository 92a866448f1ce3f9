"""The LangGraph and AG-UI adapters' pure parts: resume values, and a run's events
reshaped (fed as the event stream yields them), including where a resumed stream
picks up."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter, ValidationError

from keel.activities.store.records import EventRecord
from keel.api.agui.translate import AgUiTranslator
from keel.api.core.errors import Invalid
from keel.api.core.resume_values import decisions_for
from keel.api.core.schemas.interactions import InteractionPublic
from keel.api.events.hub import DeltaNotice
from keel.api.events.stream import Outgoing
from keel.api.langgraph.adapter import input_text, stream_modes
from keel.api.langgraph.stream import RunStreamTranslator
from keel.api.langgraph.wire import CronCreate, LangGraphRunCreate

NOW = datetime(2026, 1, 1, tzinfo=UTC)
HASH = "a" * 64
RUN = "run-1"


def interaction(ia_id: str = "ia-1-0", kind: str = "confirm") -> InteractionPublic:
    return InteractionPublic(
        id=ia_id,
        run_id=RUN,
        kind=kind,
        status="pending",
        tool="write_file" if kind == "confirm" else "ask_user",
        subject="notes.txt",
        arguments={"path": "notes.txt", "content": "hi"},
        payload_hash=HASH,
        risk="write",
        question="Which database?" if kind == "ask_user" else None,
        requester="user:alice",
        approvers=["user:alice"],
        created_at=NOW,
        expires_at=NOW + timedelta(days=1),
        decision=None,
        decided_by=None,
        decided_at=None,
        answer=None,
    )


# -- resume values ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "decision"),
    [
        (True, "approve"),
        (False, "reject"),
        ("approve", "approve"),
        ("Approve_Always", "approve_always"),
        ("reject", "reject"),
        ({"type": "accept"}, "approve"),
        ([{"type": "ignore"}], "reject"),
        ({"decision": "approve", "payload_hash": HASH}, "approve"),
    ],
)
def test_resume_values_decide_an_approval(value: Any, decision: str) -> None:
    [(ia, body)] = decisions_for(value, [interaction()])
    assert ia.id == "ia-1-0" and body.decision == decision
    if decision.startswith("approve"):
        assert body.payload_hash == HASH, "an approval names the payload it approves"


def test_a_sent_hash_is_kept_for_the_run_to_check() -> None:
    [(_, body)] = decisions_for({"decision": "approve", "payload_hash": "b" * 64}, [interaction()])
    assert body.payload_hash == "b" * 64


def test_a_question_is_answered_with_text() -> None:
    [(_, body)] = decisions_for("use staging", [interaction(kind="ask_user")])
    assert (body.decision, body.text) == ("answer", "use staging")


def test_several_waiting_need_a_map_by_interrupt_id() -> None:
    waiting = [interaction("ia-1-0"), interaction("ia-1-1")]
    with pytest.raises(Invalid, match="map of interrupt id"):
        decisions_for(True, waiting)
    decided = decisions_for({"ia-1-1": "reject", "ia-1-0": True}, waiting)
    assert [(ia.id, d.decision) for ia, d in decided] == [
        ("ia-1-1", "reject"),
        ("ia-1-0", "approve"),
    ]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("maybe", "does not answer"),
        ({"type": "edit", "args": "rm"}, "arguments as an object"),
        ({"decision": "approve", "payload_hash": "short"}, "payload_hash"),
        (42, "does not answer"),
    ],
)
def test_other_values_are_refused_with_a_sentence(value: Any, words: str) -> None:
    with pytest.raises(Invalid, match=words):
        decisions_for(value, [interaction()])


def test_an_agent_inbox_edit_approves_with_the_edited_arguments() -> None:
    ia = interaction()
    edit = {"type": "edit", "args": {"action": ia.tool, "args": {"path": "b.txt"}}}
    [(_, decision)] = decisions_for(edit, [ia])
    assert decision.decision == "approve" and decision.arguments == {"path": "b.txt"}
    assert decision.payload_hash == ia.payload_hash
    [(_, spelled)] = decisions_for({"decision": "approve", "arguments": {"path": "c"}}, [ia])
    assert spelled.arguments == {"path": "c"} and spelled.payload_hash == ia.payload_hash


def test_nothing_waiting_is_refused() -> None:
    with pytest.raises(Invalid, match="Nothing is waiting"):
        decisions_for(True, [])


def test_input_text_and_stream_modes_are_checked() -> None:
    assert input_text({"messages": [{"role": "user", "content": "hi"}]}) == "hi"
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    assert input_text({"messages": [{"type": "human", "content": parts}]}) == "a\nb"
    for bad in (None, {}, {"messages": [{"role": "assistant", "content": "x"}]}):
        with pytest.raises(Invalid, match="user message"):
            input_text(bad)
    assert stream_modes("values") == ["values"]
    assert stream_modes(["updates", "messages-tuple"]) == ["updates", "messages-tuple"]
    with pytest.raises(Invalid, match="'debug' is not supported"):
        stream_modes(["values", "debug"])


# -- events reshaped --------------------------------------------------------------


def event(seq: int, kind: str, **data: object) -> Outgoing:
    record = EventRecord(run_id=RUN, seq=seq, type=kind, data=data, created_at=NOW)
    return Outgoing(seq=seq, type=kind, chunk="", record=record)


def delta(index: int, text: str, step: int = 1) -> DeltaNotice:
    return DeltaNotice(run_id=RUN, step=step, attempt=1, delta_index=index, delta=text)


CALL = {"name": "write_file", "arguments": '{"path": "notes.txt"}', "id": "call-1"}
WAITING = [
    event(1, "run_started", input="Write the notes.", agent="build"),
    delta(0, "I will "),
    delta(1, "write."),
    event(2, "message", step=1, content="I will write.", tool_calls=[CALL]),
    event(3, "usage", step=1, prompt_tokens=10, completion_tokens=2),
    event(4, "interaction_pending", interaction_id="ia-1-0"),
]
AFTER = [
    event(5, "interaction_resolved", interaction_id="ia-1-0", decision="approve"),
    event(6, "tool_call", step=1, call_id="call-1", name="write_file", arguments="{}"),
    event(7, "tool_result", step=1, call_id="call-1", name="write_file", preview="wrote 2 bytes"),
    event(8, "message", step=2, content="Done.", tool_calls=[]),
    event(9, "done", status="completed"),
]


async def feed(
    items: list[Outgoing | DeltaNotice | str],
) -> AsyncIterator[Outgoing | DeltaNotice | str]:
    for item in items:
        yield item


def pending(still: bool) -> Any:
    async def lookup(run_id: str) -> list[InteractionPublic]:
        return [interaction()] if still else []

    return lookup


async def test_a_langgraph_stream_ends_at_the_interrupt_with_the_thread_values() -> None:
    lg = RunStreamTranslator(
        RUN, modes=["updates", "messages-tuple", "values"], earlier=[], pending=pending(True)
    )
    parts = [p async for p in lg.parts(feed([*WAITING, *AFTER]))]
    events = [p.event for p in parts if not isinstance(p, str)]
    assert events[-2:] == ["values", "updates"], "it stops at the interrupt"
    tokens = [
        p.data[0]["content"] for p in parts if not isinstance(p, str) and p.event == "messages"
    ]
    assert tokens == ["I will ", "write."], "the streamed message is not sent again whole"
    final = lg.final_values()
    assert [m["type"] for m in final["messages"]] == ["human", "ai"]
    assert final["messages"][1]["tool_calls"][0]["args"] == {"path": "notes.txt"}
    assert final["__interrupt__"][0]["id"] == "ia-1-0"
    assert lg.outcome.status == "interrupted"


async def test_a_resumed_langgraph_stream_starts_after_the_decided_interrupt() -> None:
    lg = RunStreamTranslator(
        RUN,
        modes=["updates", "values"],
        earlier=[],
        pending=pending(False),
        after_interactions=frozenset({"ia-1-0"}),
    )
    parts = [p async for p in lg.parts(feed([*WAITING, *AFTER]))]
    updates = [p.data for p in parts if not isinstance(p, str) and p.event == "updates"]
    assert [next(iter(u)) for u in updates] == ["tools", "agent"]
    assert lg.outcome.status == "success"
    assert [m["type"] for m in lg.final_values()["messages"]] == ["human", "ai", "tool", "ai"]


async def test_a_join_after_last_event_id_sends_only_what_followed() -> None:
    lg = RunStreamTranslator(RUN, modes=["values"], earlier=[], pending=pending(False), after_seq=7)
    parts = [p async for p in lg.parts(feed([*WAITING, *AFTER]))]
    assert [p.id for p in parts if not isinstance(p, str)] == [8, 9]
    assert len(parts[-1].data["messages"]) == 4  # type: ignore[union-attr]


async def test_agui_events_validate_and_keep_the_protocol_order() -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(Event)
    first = AgUiTranslator(
        thread_id="t-1", request_run_id="r-1", keel_run_id=RUN, pending=pending(True)
    )
    out = [first.started(), *[e async for e in first.events(feed(WAITING))]]
    for e in out:
        adapter.validate_python(e.model_dump(mode="json", by_alias=True))
    assert [e.type for e in out] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.CUSTOM,  # keel.usage
        EventType.CUSTOM,  # on_interrupt
        EventType.RUN_FINISHED,
    ]
    assert out[-1].model_dump()["outcome"]["interrupts"][0]["id"] == "ia-1-0"

    second = AgUiTranslator(
        thread_id="t-1",
        request_run_id="r-2",
        keel_run_id=RUN,
        pending=pending(False),
        after_interactions=frozenset({"ia-1-0"}),
    )
    out = [e async for e in second.events(feed([*WAITING, *AFTER]))]
    assert [e.type for e in out] == [
        EventType.CUSTOM,  # keel.interaction_resolved
        EventType.TOOL_CALL_RESULT,  # the call was announced by the first request
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    assert out[-1].model_dump()["outcome"]["type"] == "success"


async def test_agui_joined_mid_message_sends_the_stored_message_whole() -> None:
    late = AgUiTranslator(thread_id="t", request_run_id="r", keel_run_id=RUN, pending=pending(True))
    items = [
        delta(3, "tail only"),
        event(2, "message", step=1, content="All of it.", tool_calls=[]),
    ]
    out = [e async for e in late.events(feed(items))]
    assert [
        e.model_dump().get("delta") for e in out if e.type == EventType.TEXT_MESSAGE_CONTENT
    ] == ["All of it."]


async def test_agui_a_failed_run_ends_with_run_error() -> None:
    translator = AgUiTranslator(
        thread_id="t", request_run_id="r", keel_run_id=RUN, pending=pending(False)
    )
    out = [
        e async for e in translator.events(feed([delta(0, "Par"), event(1, "error", error="boom")]))
    ]
    assert [e.type for e in out] == [
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_ERROR,
    ]
    assert out[-1].model_dump()["message"] == "boom"


def test_a_webhook_must_be_an_http_url() -> None:
    with pytest.raises(ValidationError, match="webhook"):
        LangGraphRunCreate(assistant_id="review", webhook="file:///etc/passwd")
    with pytest.raises(ValidationError, match="webhook"):
        CronCreate(assistant_id="review", schedule="0 2 * * *", webhook="gopher://x")
    assert LangGraphRunCreate(assistant_id="review", webhook="https://hooks.example/keel")
