"""The scripted LLM server, driven by the real `openai` client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from pydantic import ValidationError

from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn

DEMO_SCRIPT = Path(__file__).parents[2] / "worker" / "scripts" / "demo_review.yaml"

SCRIPT = Script(
    name="test-model",
    turns=[
        Turn(
            content="Looking around.",
            tool_calls=[
                ScriptedToolCall(name="read_file", arguments={"path": "a.py"}),
                ScriptedToolCall(name="list_files", arguments={"pattern": "**/*"}),
            ],
            prompt_tokens=11,
            completion_tokens=7,
        ),
        Turn(content="## Files reviewed\n\n{files_read}\n\nResults: {tool_results}"),
    ],
)

USER: ChatCompletionMessageParam = {"role": "user", "content": "Review the project."}


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(SCRIPT) as running:
        yield running


def client_for(server: ScriptedLLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)


def assistant_with_calls(*calls: tuple[str, str, str]) -> dict[str, Any]:
    """An assistant message with (id, name, arguments) tool calls."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}
            for id_, name, args in calls
        ],
    }


def tool(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_base_url_is_a_real_port(server: ScriptedLLMServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.base_url.endswith("/v1")
    assert server.port > 0


def test_non_streaming_tool_call_turn(server: ScriptedLLMServer) -> None:
    completion = client_for(server).chat.completions.create(model="gpt-x", messages=[USER])

    assert completion.object == "chat.completion"
    assert completion.model == "gpt-x"
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.role == "assistant"
    assert choice.message.content == "Looking around."
    calls = choice.message.tool_calls or []
    assert [(c.id, c.type) for c in calls] == [("call_0_0", "function"), ("call_0_1", "function")]
    assert calls[0].function.name == "read_file"  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments) == {"path": "a.py"}  # type: ignore[union-attr]
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (11, 7)
    assert completion.usage.total_tokens == 18


def test_final_content_turn(server: ScriptedLLMServer) -> None:
    messages: list[Any] = [USER, {"role": "assistant", "content": "Hello."}]
    completion = client_for(server).chat.completions.create(model="m", messages=messages)

    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    assert choice.message.content == "## Files reviewed\n\n- (none)\n\nResults: 0"


def test_streaming_reassembles_content_tool_calls_and_usage(server: ScriptedLLMServer) -> None:
    stream = client_for(server).chat.completions.create(
        model="m", messages=[USER], stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)

    content_deltas = [c.choices[0].delta.content for c in chunks if c.choices]
    assert len([d for d in content_deltas if d]) > 1
    assert "".join(d or "" for d in content_deltas) == "Looking around."

    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += delta.id or ""
            if delta.function is not None:
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
    assert calls == {
        0: {"id": "call_0_0", "name": "read_file", "arguments": '{"path": "a.py"}'},
        1: {"id": "call_0_1", "name": "list_files", "arguments": '{"pattern": "**/*"}'},
    }

    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls"
    assert all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 18


def test_streaming_without_usage_sends_no_usage_chunk(server: ScriptedLLMServer) -> None:
    messages: list[Any] = [USER, {"role": "assistant", "content": "Hi."}]
    chunks = list(
        client_for(server).chat.completions.create(model="m", messages=messages, stream=True)
    )
    assert all(c.choices and c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_same_request_gets_same_turn_and_is_counted_twice(server: ScriptedLLMServer) -> None:
    client = client_for(server)
    first = client.chat.completions.create(model="m", messages=[USER])
    second = client.chat.completions.create(model="m", messages=[USER])

    assert first.choices[0].message == second.choices[0].message
    assert server.requests_by_turn[0] == 2
    assert server.total_requests == 2
    assert server.last_request(0)["messages"] == [USER]

    client.chat.completions.create(
        model="m", messages=[USER, {"role": "assistant", "content": "x"}]
    )
    assert server.requests_by_turn == {0: 2, 1: 1}

    server.reset()
    assert server.total_requests == 0
    assert not server.requests_by_turn
    with pytest.raises(KeyError):
        server.last_request(0)


def test_files_read_excludes_failed_and_unanswered_reads(server: ScriptedLLMServer) -> None:
    messages: list[Any] = [
        USER,
        assistant_with_calls(
            ("c1", "read_file", '{"path": "a.py"}'),
            ("c2", "read_file", '{"path": "missing.py"}'),
            ("c3", "list_files", '{"pattern": "**/*"}'),
            ("c4", "read_file", '{"path": "a.py", "start_line": 5}'),
            ("c5", "read_file", '{"path": "never_answered.py"}'),
            ("c6", "read_file", '{"path": "b.py"}'),
        ),
        tool("c1", "1: import os"),
        tool("c2", "Error: file not found: missing.py"),
        tool("c3", "a.py\nb.py"),
        tool("c4", "5: x = 1"),
        {
            "role": "tool",
            "tool_call_id": "c6",
            "content": [{"type": "text", "text": "1: y = 2"}],
        },
    ]
    completion = client_for(server).chat.completions.create(model="m", messages=messages)

    assert completion.choices[0].message.content == (
        "## Files reviewed\n\n- a.py\n- b.py\n\nResults: 5"
    )


def test_exhausted_script_is_a_bad_request(server: ScriptedLLMServer) -> None:
    messages: list[Any] = [USER, *[{"role": "assistant", "content": "x"}] * 2]
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(server).chat.completions.create(model="m", messages=messages)

    assert caught.value.status_code == 400
    assert "script exhausted" in caught.value.message
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["type"] == "invalid_request_error"
    assert server.requests_by_turn[2] == 1


def test_malformed_arguments_are_sent_verbatim() -> None:
    broken = '{"path": "a.py"'
    script = Script(turns=[Turn(tool_calls=[ScriptedToolCall(name="read_file", arguments=broken)])])
    with ScriptedLLMServer(script) as server:
        client = client_for(server)
        completion = client.chat.completions.create(model="m", messages=[USER])
        streamed = "".join(
            delta.function.arguments or ""
            for chunk in client.chat.completions.create(model="m", messages=[USER], stream=True)
            if chunk.choices
            for delta in chunk.choices[0].delta.tool_calls or []
            if delta.function is not None
        )

    call = (completion.choices[0].message.tool_calls or [])[0]
    assert call.function.arguments == broken  # type: ignore[union-attr]
    assert completion.choices[0].message.content is None
    assert streamed == broken


def test_delay_is_honoured() -> None:
    script = Script(turns=[Turn(content="slow", delay_s=0.4)])
    with ScriptedLLMServer(script) as server:
        client = client_for(server)
        started = time.monotonic()
        client.chat.completions.create(model="m", messages=[USER])
        elapsed = time.monotonic() - started
        # Counted on arrival, so a request still sleeping is already visible.
        assert server.requests_by_turn[0] == 1

    assert 0.4 <= elapsed < 3.0


def test_a_held_reply_waits_for_release_and_is_counted_meanwhile() -> None:
    with ScriptedLLMServer(Script(turns=[Turn(content="at last")])) as server:
        server.hold()
        client = client_for(server)
        replies: list[str | None] = []
        asking = threading.Thread(
            target=lambda: replies.append(
                client.chat.completions.create(model="m", messages=[USER])
                .choices[0]
                .message.content
            )
        )
        asking.start()
        deadline = time.monotonic() + 10
        while server.requests_by_turn[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.requests_by_turn[0] == 1
        asking.join(0.5)
        assert asking.is_alive() and replies == [], "a held reply is not sent"
        server.release()
        asking.join(10)
        assert replies == ["at last"]
        # Released for good: the next request is answered at once.
        assert client.chat.completions.create(model="m", messages=[USER]).choices[0].message.content


def test_stop_releases_a_held_reply() -> None:
    server = ScriptedLLMServer(Script(turns=[Turn(content="never")]))
    server.start()
    server.hold()
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=[USER])
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 5


def test_stop_does_not_wait_for_a_long_delay() -> None:
    script = Script(turns=[Turn(content="slow", delay_s=30)])
    server = ScriptedLLMServer(script)
    server.start()
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=[USER])
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 5


def test_models_lists_the_script_model(server: ScriptedLLMServer) -> None:
    models = client_for(server).models.list()
    assert [m.id for m in models.data] == ["test-model"]


@pytest.mark.parametrize(
    ("content", "param"),
    [(b"not json", None), (b'{"model": "m"}', "messages"), (b"[1, 2]", "messages")],
)
def test_malformed_body_is_rejected(
    server: ScriptedLLMServer, content: bytes, param: str | None
) -> None:
    response = httpx.post(
        f"{server.base_url}/chat/completions",
        content=content,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["message"]
    assert server.total_requests == 1
    assert not server.requests_by_turn


def test_turn_needs_content_or_tool_calls() -> None:
    with pytest.raises(ValidationError, match="needs `content`, `tool_calls` or both"):
        Turn()
    assert Turn(content="").content == ""


def test_load_json_and_yaml(tmp_path: Path) -> None:
    data = {"name": "n", "turns": [{"content": "hi"}, {"tool_calls": [{"name": "t"}]}]}
    as_json = tmp_path / "s.json"
    as_json.write_text(json.dumps(data))
    as_yaml = tmp_path / "s.yaml"
    as_yaml.write_text("name: n\nturns:\n  - content: hi\n  - tool_calls:\n      - name: t\n")

    assert Script.load(as_json) == Script.load(as_yaml) == Script.model_validate(data)

    as_list = tmp_path / "list.yaml"
    as_list.write_text("- content: hi\n")
    with pytest.raises(ValueError, match="must hold a mapping"):
        Script.load(as_list)


def test_demo_script_plays_a_review() -> None:
    script = Script.load(DEMO_SCRIPT)
    assert len(script.turns) == 5
    assert [[c.name for c in t.tool_calls] for t in script.turns] == [
        ["list_files"],
        ["read_file", "read_file"],
        ["search_code"],
        ["read_file"],
        [],
    ]
    assert script.turns[0].tool_calls[0].arguments == {"pattern": "**/*"}
    assert script.turns[2].tool_calls[0].arguments == {"pattern": "TODO|FIXME"}
    final = script.turns[4].content or ""
    assert "## Files reviewed" in final
    assert "{files_read}" in final


# -- failure modes ------------------------------------------------------------


def failing(status: int, times: int, retry_after_s: float | None = None) -> Script:
    """Turn 0 fails `times` times with `status`, then answers; turn 1 always answers."""
    return Script(
        turns=[
            Turn(
                content="recovered",
                fail_status=status,
                fail_times=times,
                retry_after_s=retry_after_s,
            ),
            Turn(content="second"),
        ]
    )


@pytest.mark.parametrize(
    ("status", "exc_type", "error_type", "code"),
    [
        (400, openai.BadRequestError, "invalid_request_error", None),
        (401, openai.AuthenticationError, "invalid_request_error", "invalid_api_key"),
        (403, openai.PermissionDeniedError, "permission_error", None),
        (429, openai.RateLimitError, "requests", "rate_limit_exceeded"),
        (500, openai.InternalServerError, "server_error", None),
        (503, openai.InternalServerError, "server_error", None),
    ],
)
def test_a_failing_turn_fails_then_answers(
    status: int, exc_type: type[openai.APIStatusError], error_type: str, code: str | None
) -> None:
    with ScriptedLLMServer(failing(status, 2)) as server:
        client = client_for(server)
        for attempt in (1, 2):
            with pytest.raises(exc_type) as caught:
                client.chat.completions.create(model="m", messages=[USER])
            assert caught.value.status_code == status
            body = caught.value.body
            assert isinstance(body, dict)
            assert body["type"] == error_type and body["code"] == code
            assert f"Scripted failure {attempt} of 2 for turn 0" in body["message"]
            assert "retry-after" not in caught.value.response.headers

        completion = client.chat.completions.create(model="m", messages=[USER])
        assert completion.choices[0].message.content == "recovered"
        assert server.requests_by_turn == {0: 3}
        assert server.total_requests == 3


def test_streaming_requests_fail_the_same_way() -> None:
    with ScriptedLLMServer(failing(503, 1)) as server:
        client = client_for(server)
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=[USER], stream=True)
        chunks = list(client.chat.completions.create(model="m", messages=[USER], stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "recovered"
        assert server.requests_by_turn[0] == 2


@pytest.mark.parametrize(("retry_after_s", "header"), [(2, "2"), (2.0, "2"), (0.5, "0.5")])
def test_retry_after_header_is_sent_with_failures_only(retry_after_s: float, header: str) -> None:
    with ScriptedLLMServer(failing(429, 1, retry_after_s=retry_after_s)) as server:
        url = f"{server.base_url}/chat/completions"
        request = {"model": "m", "messages": [USER]}
        failed = httpx.post(url, json=request)
        answered = httpx.post(url, json=request)

    assert failed.status_code == 429
    assert failed.headers["retry-after"] == header
    assert failed.json()["error"]["code"] == "rate_limit_exceeded"
    assert answered.status_code == 200
    assert "retry-after" not in answered.headers


def test_failures_count_per_turn_and_replay_after_reset() -> None:
    script = Script(
        turns=[
            Turn(content="first"),
            Turn(content="second", fail_status=500, fail_times=1),
        ]
    )
    later: list[Any] = [USER, {"role": "assistant", "content": "first"}]
    with ScriptedLLMServer(script) as server:
        client = client_for(server)
        # Requests for turn 0 do not use up turn 1's failures.
        for _ in range(3):
            client.chat.completions.create(model="m", messages=[USER])
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=later)
        assert (
            client.chat.completions.create(model="m", messages=later).choices[0].message.content
            == "second"
        )
        assert server.requests_by_turn == {0: 3, 1: 2}

        server.reset()
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=later)


def test_failures_are_answered_without_the_delay() -> None:
    script = Script(turns=[Turn(content="slow", delay_s=1.0, fail_status=503, fail_times=1)])
    with ScriptedLLMServer(script) as server:
        client = client_for(server)
        started = time.monotonic()
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=[USER])
        failed_after = time.monotonic() - started
        client.chat.completions.create(model="m", messages=[USER])
        answered_after = time.monotonic() - started

    assert failed_after < 0.9
    assert answered_after >= 1.0


def test_fail_status_without_fail_times_never_fails() -> None:
    with ScriptedLLMServer(failing(503, 0)) as server:
        completion = client_for(server).chat.completions.create(model="m", messages=[USER])
    assert completion.choices[0].message.content == "recovered"


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"fail_times": 1}, "need `fail_status`"),
        ({"retry_after_s": 1.0}, "need `fail_status`"),
        ({"fail_status": 200, "fail_times": 1}, "greater than or equal to 400"),
        ({"fail_status": 600, "fail_times": 1}, "less than or equal to 599"),
        ({"fail_status": 503, "fail_times": -1}, "greater than or equal to 0"),
        ({"fail_status": 429, "fail_times": 1, "retry_after_s": -1}, "greater than or equal to 0"),
    ],
)
def test_failure_fields_are_validated(fields: dict[str, object], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        Turn.model_validate({"content": "x", **fields})


def test_failures_load_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "flaky.yaml"
    path.write_text(
        "turns:\n  - content: hi\n    fail_status: 429\n    fail_times: 2\n    retry_after_s: 1.5\n"
    )
    turn = Script.load(path).turns[0]
    assert (turn.fail_status, turn.fail_times, turn.retry_after_s) == (429, 2, 1.5)
    assert Turn(content="x").fail_status is None
