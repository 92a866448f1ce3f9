"""Property-based fuzz of the JSON-RPC surfaces, A2A (v1.0, v0.3, v0.1) and MCP, over HTTP.

Requests are generated from the protocols' own types: the a2a-sdk's v1.0 protobuf
messages, its v0.3 pydantic models and the MCP SDK's request models (JSON schemas).
Any value may be swapped for a hostile one: a NUL byte, a huge string, deep nesting or
a value of the wrong type. The bar for every answer: no 5xx, no -32603 (an internal
error), and an answer within REQUEST_TIMEOUT_S (no hung connection).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import a2a.compat.v0_3.types as v03
import a2a.types as v10
import httpx
import mcp_types
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from tests.conftest import auth_headers
from tests.integration.test_api_fuzz import StackThread

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
Json = Any

HEADERS = auth_headers("protocol-fuzz", "fuzzer")
REQUEST_TIMEOUT_S = 30.0
INTERNAL_ERROR = -32603
MAX_DEPTH = 4


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


# -- hostile values ---------------------------------------------------------------------

HOSTILE_STRINGS = st.one_of(
    st.text(max_size=12).map(lambda s: s + "\x00" + s),
    st.sampled_from(["x" * 300_000, "c" * 1_000, "a b/c", "ROLE_KING", "", " ", "\ud7ff\ufffe"]),
)
DEEP = st.sampled_from([1_000, 3_000, 100_000]).map(
    lambda depth: {"__raw_depth__": depth}  # spliced in as text: json.dumps would recurse
)
WRONG_TYPES: st.SearchStrategy[Json] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.text(max_size=10),
)
HOSTILE = st.one_of(HOSTILE_STRINGS, DEEP, WRONG_TYPES)


CLEAN = [False]
"""While set, the strategies being built are of well-formed requests only."""


def sometimes_hostile(proper: st.SearchStrategy[Json]) -> st.SearchStrategy[Json]:
    """Mostly the proper value; one draw in eight a hostile one in its place."""
    if CLEAN[0]:
        return proper
    return st.integers(0, 7).flatmap(lambda n: HOSTILE if n == 0 else proper)


def clean(build: Callable[[], Any]) -> Any:
    """The strategy `build` makes, with no hostile values in it."""
    CLEAN[0] = True
    try:
        return build()
    finally:
        CLEAN[0] = False


def strings() -> st.SearchStrategy[str]:
    return st.one_of(st.text(max_size=20), st.sampled_from(["review", "run-nope", "x" * 64]))


# -- from a JSON schema (pydantic models: a2a v0.3 and MCP) ------------------------------


def from_json_schema(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> Any:
    """Values a (pydantic-made) JSON schema admits, any of them possibly hostile."""
    if "$ref" in schema:
        return from_json_schema(defs[schema["$ref"].split("/")[-1]], defs, depth)
    if depth > MAX_DEPTH:
        return st.one_of(st.none(), st.text(max_size=5))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_json_schema(s, defs, depth) for s in schema[key]])
    if "allOf" in schema:
        return from_json_schema(schema["allOf"][0], defs, depth)
    if "const" in schema:
        return sometimes_hostile(st.just(schema["const"]))
    if "enum" in schema:
        return sometimes_hostile(st.sampled_from(schema["enum"]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_json_schema({**schema, "type": k}, defs, depth) for k in kind])
    proper: st.SearchStrategy[Json]
    if kind == "object" or "properties" in schema:
        proper = _object(schema, defs, depth)
    elif kind == "array":
        items = from_json_schema(schema.get("items", {}), defs, depth + 1)
        proper = st.lists(items, max_size=3)
    elif kind == "string":
        proper = strings()
    elif kind == "integer":
        proper = st.integers(min_value=-5, max_value=200)
    elif kind == "number":
        proper = st.floats(allow_nan=False, allow_infinity=False)
    elif kind == "boolean":
        proper = st.booleans()
    elif kind == "null":
        proper = st.none()
    else:  # any JSON
        proper = st.one_of(st.none(), st.integers(), st.text(max_size=8))
    return sometimes_hostile(proper)


def _object(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> Any:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = {
        name: from_json_schema(sub, defs, depth + 1)
        for name, sub in properties.items()
        if name in required
    }
    optional = {
        name: from_json_schema(sub, defs, depth + 1)
        for name, sub in properties.items()
        if name not in required
    }
    return st.fixed_dictionaries(fields, optional=optional)


def schema_strategy(model: type[BaseModel], field: str = "") -> Any:
    schema = model.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})
    if field:
        schema = schema["properties"][field]
    return from_json_schema(schema, defs)


# -- from a protobuf descriptor (a2a v1.0) ----------------------------------------------

SCALARS: dict[int, Any] = {
    FieldDescriptor.TYPE_STRING: strings(),
    FieldDescriptor.TYPE_BYTES: st.sampled_from(["aGk=", "not base64!"]),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_DOUBLE: st.floats(allow_nan=False, allow_infinity=False),
    FieldDescriptor.TYPE_FLOAT: st.floats(width=32, allow_nan=False, allow_infinity=False),
}


def from_proto(descriptor: Descriptor, depth: int = 0) -> Any:
    """Messages as their JSON form (camelCase names, enum names), any value possibly hostile."""
    if descriptor.full_name == "google.protobuf.Struct":
        return st.dictionaries(st.text(max_size=6), sometimes_hostile(strings()), max_size=3)
    if descriptor.full_name == "google.protobuf.Value":
        return sometimes_hostile(strings())
    if descriptor.full_name == "google.protobuf.Timestamp":
        return st.sampled_from(["2026-01-01T00:00:00Z", "yesterday"])
    fields: dict[str, Any] = {}
    for field in descriptor.fields:
        value = _proto_field(field, depth)
        if value is not None:
            fields[field.json_name] = value
    return sometimes_hostile(st.fixed_dictionaries({}, optional=fields))


def _proto_field(field: FieldDescriptor, depth: int) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if depth >= MAX_DEPTH:
            return None
        message = field.message_type
        if message.GetOptions().map_entry:
            value = _proto_field(message.fields_by_name["value"], depth + 1)
            return st.dictionaries(st.text(max_size=6), value or st.none(), max_size=2)
        single = from_proto(message, depth + 1)
    elif field.type == FieldDescriptor.TYPE_ENUM:
        names = [v.name for v in field.enum_type.values]
        single = sometimes_hostile(st.sampled_from(names))
    elif field.type in SCALARS:
        single = sometimes_hostile(SCALARS[field.type])
    else:  # the integer types
        single = sometimes_hostile(st.integers(min_value=-5, max_value=200))
    if field.is_repeated:
        return st.lists(single, max_size=3)
    return single


# -- the requests -------------------------------------------------------------------------

V10_METHODS: dict[str, Descriptor] = {
    "SendMessage": v10.SendMessageRequest.DESCRIPTOR,
    "GetTask": v10.GetTaskRequest.DESCRIPTOR,
    "ListTasks": v10.ListTasksRequest.DESCRIPTOR,
    "CancelTask": v10.CancelTaskRequest.DESCRIPTOR,
    "SendStreamingMessage": v10.SendMessageRequest.DESCRIPTOR,
    "SubscribeToTask": v10.SubscribeToTaskRequest.DESCRIPTOR,
}
V03_METHODS: dict[str, type[BaseModel]] = {
    "message/send": v03.MessageSendParams,
    "message/stream": v03.MessageSendParams,
    "tasks/get": v03.TaskQueryParams,
    "tasks/cancel": v03.TaskIdParams,
    "tasks/resubscribe": v03.TaskIdParams,
}


def v01_params() -> Any:
    return st.fixed_dictionaries(
        {},
        optional={
            "id": sometimes_hostile(strings()),
            "sessionId": sometimes_hostile(strings()),
            "message": sometimes_hostile(
                st.fixed_dictionaries(
                    {"role": sometimes_hostile(st.sampled_from(["user", "agent"]))},
                    optional={
                        "parts": sometimes_hostile(
                            st.lists(
                                sometimes_hostile(
                                    st.fixed_dictionaries(
                                        {
                                            "type": st.just("text"),
                                            "text": sometimes_hostile(strings()),
                                        }
                                    )
                                ),
                                max_size=2,
                            )
                        )
                    },
                )
            ),
        },
    )


def request_ids() -> Any:
    return sometimes_hostile(st.one_of(st.integers(0, 1000), st.text(max_size=8)))


def envelope(method: str, params: Any) -> Any:
    return st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "id": request_ids(),
            "method": st.just(method),
            "params": params,
        }
    )


def a2a_requests() -> Any:
    return st.one_of(
        *[envelope(m, from_proto(d)) for m, d in V10_METHODS.items()],
        *[envelope(m, schema_strategy(model)) for m, model in V03_METHODS.items()],
        envelope("tasks/send", sometimes_hostile(v01_params())),
    )


def _v10_send(text: str, context: str | None) -> Json:
    message = v10.Message(message_id="fz", role=v10.Role.ROLE_USER, parts=[v10.Part(text=text)])
    if context:
        message.context_id = context
    return MessageToDict(v10.SendMessageRequest(message=message))


def _v03_send(text: str, context: str | None) -> Json:
    part = v03.Part(root=v03.TextPart(text=text))
    message = v03.Message(message_id="fz", role=v03.Role.user, parts=[part], context_id=context)
    return v03.MessageSendParams(message=message).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )


TEXTS = st.text(min_size=1, max_size=40).filter(lambda t: t.strip() and "\x00" not in t)
CONTEXTS = st.one_of(st.none(), st.from_regex(r"\Afz-[a-z0-9]{1,8}\Z"))
WELL_FORMED = st.one_of(
    envelope("SendMessage", st.builds(_v10_send, TEXTS, CONTEXTS)),
    envelope("message/send", st.builds(_v03_send, TEXTS, CONTEXTS)),
    envelope("ListTasks", st.builds(lambda n: {"pageSize": n}, st.integers(1, 100))),
    envelope(
        "tasks/send",
        st.builds(
            lambda t: {"message": {"role": "user", "parts": [{"type": "text", "text": t}]}}, TEXTS
        ),
    ),
)
"""Requests the SDKs' own types make, so a share of the fuzz reaches the run itself."""
# Well-formed requests, ones generated from the types without hostile values (which reach
# deeper checks), and ones with hostile values.
A2A_REQUESTS = st.one_of(clean(lambda: WELL_FORMED), clean(a2a_requests), a2a_requests())
MCP_MODELS: list[type[BaseModel]] = [
    mcp_types.InitializeRequest,
    mcp_types.PingRequest,
    mcp_types.ListToolsRequest,
    mcp_types.CallToolRequest,
    mcp_types.ListPromptsRequest,
    mcp_types.GetPromptRequest,
    mcp_types.ListResourcesRequest,
    mcp_types.ReadResourceRequest,
]
MCP_REQUESTS = st.one_of(
    *[
        st.tuples(request_ids(), schema_strategy(model)).map(
            lambda pair: (
                {"jsonrpc": "2.0", "id": pair[0], **(pair[1] or {})}
                if isinstance(pair[1], dict)
                else {"jsonrpc": "2.0", "id": pair[0], "method": "ping", "params": pair[1]}
            )
        )
        for model in MCP_MODELS
    ],
)
MCP_TOOL_CALLS = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "id": st.integers(1, 100),
        "method": st.just("tools/call"),
        "params": st.fixed_dictionaries(
            {
                "name": st.sampled_from(
                    ["start_run", "get_run", "list_runs", "cancel_run", "decide", "read_file"]
                ),
                "arguments": st.dictionaries(
                    st.sampled_from(
                        ["agent", "input", "workspace", "run_id", "session_id", "path", "decision"]
                    ),
                    sometimes_hostile(strings()),
                    max_size=4,
                ),
            }
        ),
    }
)


def encoded(request: Json) -> bytes:
    """The request as bytes, with each deep-nesting marker spliced in as raw text."""
    deep: list[int] = []

    def marker(value: Json) -> Json:
        if isinstance(value, dict):
            if set(value) == {"__raw_depth__"}:
                deep.append(value["__raw_depth__"])
                return f"__deep{len(deep) - 1}__"
            return {k: marker(v) for k, v in value.items()}
        if isinstance(value, list):
            return [marker(v) for v in value]
        return value

    text = json.dumps(marker(request))
    for i, depth in enumerate(deep):
        text = text.replace(f'"__deep{i}__"', "[" * depth + "]" * depth)
    return text.encode()


def check_answer(response: httpx.Response, request: bytes) -> None:
    shown = request[:300]
    assert response.status_code < 500, (
        f"{response.status_code} for {shown!r}: {response.text[:500]}"
    )
    kind = response.headers.get("content-type", "")
    # `splitlines`, as httpx's `aiter_lines` (the a2a-sdk client's reader) splits: a
    # U+2028 left raw in an event's JSON would cut it there (issue 21).
    bodies = (
        [
            line.removeprefix("data:")
            for line in response.text.splitlines()
            if line.startswith("data:")
        ]
        if kind.startswith("text/event-stream")
        else [response.text]
        if response.content
        else []
    )
    for body in bodies:
        data = json.loads(body)
        for answer in data if isinstance(data, list) else [data]:
            error = answer.get("error") if isinstance(answer, dict) else None
            if isinstance(error, dict):
                assert error.get("code") != INTERNAL_ERROR, f"-32603 for {shown!r}: {error}"


@pytest.fixture
def keel_url(workspace: Path, scripted: StartLLM, settings_for: MakeSettings) -> Iterator[str]:
    """Keel with a worker; any run the fuzz starts ends at once with a final answer."""
    llm = scripted(Script(turns=[Turn(content=f"Done ({i}).") for i in range(8)]))
    with StackThread(settings_for(llm, workspace, api_port=free_port())) as url:
        yield url


def post(url: str, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        try:
            response = http.post(
                path,
                content=body,
                headers={**HEADERS, "content-type": "application/json", **headers},
            )
        except httpx.TimeoutException as exc:
            raise AssertionError(f"no answer in {REQUEST_TIMEOUT_S} s to {body[:300]!r}") from exc
        check_answer(response, body)
        return response


def answered(response: httpx.Response) -> bool:
    """Whether the request got a result, not an error: the fuzz must reach the handlers."""
    return response.status_code == 200 and '"result"' in response.text


A2A_VERSION = {"A2A-Version": "1.0"}
MCP_ACCEPT = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


def _fuzz_a2a(url: str, examples: int) -> None:
    results = []

    @fuzz_settings(examples)
    @given(request=A2A_REQUESTS, versioned=st.booleans())
    def run(request: Json, versioned: bool) -> None:
        response = post(url, "/a2a", encoded(request), A2A_VERSION if versioned else {})
        results.append(answered(response))

    run()
    assert any(results), "no generated A2A request got past validation"
    print(f"A2A: {sum(results)} of {len(results)} answered with a result")


def _fuzz_mcp(url: str, examples: int) -> None:
    results = []

    @fuzz_settings(examples)
    @given(request=st.one_of(MCP_REQUESTS, MCP_TOOL_CALLS))
    def run(request: Json) -> None:
        results.append(answered(post(url, "/mcp", encoded(request), MCP_ACCEPT)))

    run()
    assert any(results), "no generated MCP request got past validation"
    print(f"MCP: {sum(results)} of {len(results)} answered with a result")


@pytest.mark.fuzz  # 200 generated requests; the long run is below
def test_a2a_json_rpc_fuzz(keel_url: str) -> None:
    _fuzz_a2a(keel_url, 120)


@pytest.mark.fuzz  # 200 generated requests; the long run is below
def test_mcp_fuzz(keel_url: str) -> None:
    _fuzz_mcp(keel_url, 80)


@pytest.mark.fuzz  # several minutes: 2,500 requests, many of them starting runs
@pytest.mark.timeout(1200)  # past the suite's 300 s per test: 3-6 minutes in all
def test_a2a_and_mcp_fuzz_long(keel_url: str) -> None:
    """The same generator further: its first requests are the quick test's, so their
    `contextId`s name sessions whose workflows that test's Keel (another task queue,
    no worker any more) started; each must move to this Keel (api/core/session_home)."""
    _fuzz_a2a(keel_url, 1_500)
    _fuzz_mcp(keel_url, 1_000)
