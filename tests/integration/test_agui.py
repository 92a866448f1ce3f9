"""AG-UI: a `RunAgentInput` in, AG-UI events out (SSE), parsed and validated with the
`ag-ui-protocol` package's models; an interrupt resumed by a second request finishes
the same durable run."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import BaseEvent, Event, EventType, RunAgentInput, UserMessage
from pydantic import TypeAdapter

from keel.worker.scripted.llm import Script, Turn
from tests.integration.keel_http import ALICE, MALLORY, LaunchKeel
from tests.integration.test_approvals import executions, write

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


async def run_agent(
    http: httpx.AsyncClient, agent: str, body: RunAgentInput, headers: dict[str, str]
) -> list[BaseEvent]:
    """POST the input and read the SSE stream to its end, each event validated."""
    payload = body.model_dump(mode="json", by_alias=True)
    events: list[BaseEvent] = []
    async with http.stream("POST", f"/ag-ui/{agent}", json=payload, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(EVENTS.validate_python(json.loads(line.removeprefix("data: "))))
    return events


def types(events: list[BaseEvent]) -> list[EventType]:
    return [e.type for e in events]


def assert_protocol_order(events: list[BaseEvent]) -> None:
    """RUN_STARTED first and one terminal event last; every text message and tool call
    opens before its content and closes once; results follow their call's end."""
    assert events[0].type == EventType.RUN_STARTED
    assert events[-1].type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    assert sum(e.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR) for e in events) == 1
    open_messages: set[str] = set()
    open_calls: set[str] = set()
    ended_calls: set[str] = set()
    for event in events:
        data = event.model_dump()
        if event.type == EventType.TEXT_MESSAGE_START:
            open_messages.add(data["message_id"])
        elif event.type in (EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END):
            assert data["message_id"] in open_messages
            if event.type == EventType.TEXT_MESSAGE_END:
                open_messages.remove(data["message_id"])
        elif event.type == EventType.TOOL_CALL_START:
            open_calls.add(data["tool_call_id"])
        elif event.type in (EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END):
            assert data["tool_call_id"] in open_calls
            if event.type == EventType.TOOL_CALL_END:
                open_calls.remove(data["tool_call_id"])
                ended_calls.add(data["tool_call_id"])
    assert not open_messages and not open_calls


async def test_an_interrupt_ends_the_stream_and_a_resume_finishes_the_same_run(
    workspace: Path, database_url: str, keel_app: LaunchKeel
) -> None:
    script = Script(
        turns=[
            Turn(
                content="I will write the notes.",
                tool_calls=[write("notes.txt", "hi")],
                delay_s=0.5,  # the stream is subscribed well before the first token
                stream_pause_s=0.02,
            ),
            Turn(content="The notes are written.", stream_pause_s=0.02),
        ]
    )
    thread_id = f"thread-{uuid.uuid4().hex[:8]}"
    async with keel_app(script, headers={}, http_timeout=60) as http:
        ask = RunAgentInput(
            thread_id=thread_id,
            run_id=f"run-{uuid.uuid4().hex[:8]}",
            messages=[UserMessage(id="m1", content="Write the notes.")],
        )
        first = await run_agent(http, "build", ask, ALICE)
        assert_protocol_order(first)
        assert types(first)[:1] == [EventType.RUN_STARTED]
        started = first[0].model_dump()
        keel_run = started["metadata"]["keel_run_id"]
        assert keel_run == ask.run_id, "a new run takes the client's run id"
        call = next(e for e in first if e.type == EventType.TOOL_CALL_START).model_dump()
        assert call["tool_call_name"] == "write_file"
        assert EventType.CUSTOM in types(first)
        said = [e.model_dump()["delta"] for e in first if e.type == EventType.TEXT_MESSAGE_CONTENT]
        assert len(said) > 1 and "".join(said) == "I will write the notes.", "tokens stream live"
        finished = first[-1].model_dump()
        assert finished["type"] == EventType.RUN_FINISHED
        interrupts = finished["outcome"]["interrupts"]
        assert finished["outcome"]["type"] == "interrupt" and len(interrupts) == 1
        assert interrupts[0]["reason"] == "tool_approval"
        assert interrupts[0]["metadata"]["arguments"] == {"path": "notes.txt", "content": "hi"}
        assert not (workspace / "notes.txt").exists()

        # Another tenant's resume finds no such thread.
        resume = RunAgentInput.model_validate(
            {
                "threadId": thread_id,
                "runId": f"run-{uuid.uuid4().hex[:8]}",
                "messages": [],
                "resume": [
                    {
                        "interruptId": interrupts[0]["id"],
                        "status": "resolved",
                        "payload": {
                            "decision": "approve",
                            "payload_hash": interrupts[0]["metadata"]["payload_hash"],
                        },
                    }
                ],
            }
        )
        refused = await http.post(
            "/ag-ui/build",
            json=resume.model_dump(mode="json", by_alias=True),
            headers=MALLORY,
        )
        assert refused.status_code == 404

        second = await run_agent(http, "build", resume, ALICE)
        assert_protocol_order(second)
        assert second[0].model_dump()["metadata"]["keel_run_id"] == keel_run, "the same run"
        kinds = types(second)
        assert EventType.TOOL_CALL_RESULT in kinds
        assert kinds.index(EventType.TOOL_CALL_RESULT) < kinds.index(EventType.TEXT_MESSAGE_START)
        text = "".join(
            e.model_dump()["delta"] for e in second if e.type == EventType.TEXT_MESSAGE_CONTENT
        )
        assert text == "The notes are written."
        assert EventType.TOOL_CALL_START not in kinds, "the call was announced before"
        assert second[-1].model_dump()["outcome"]["type"] == "success"
        assert (workspace / "notes.txt").read_text() == "hi"
        assert await executions(database_url, keel_run) == 1


async def test_an_input_without_a_user_message_is_refused(
    keel_app: LaunchKeel,
) -> None:
    unused = Script(turns=[Turn(content="unused")])
    async with keel_app(unused, headers={}, worker=False) as http:
        empty = {"threadId": "t-empty", "runId": "r-1", "messages": []}
        refused = await http.post("/ag-ui/review", json=empty, headers=ALICE)
        assert refused.status_code == 422 and "user message" in refused.text
        malformed = await http.post("/ag-ui/review", json={"threadId": "t"}, headers=ALICE)
        assert malformed.status_code == 422
        unauthenticated = await http.post("/ag-ui/review", json=empty)
        assert unauthenticated.status_code == 401
