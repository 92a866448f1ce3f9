"""HTTP surface of A2A: agent cards and the JSON-RPC endpoint (v1.0, v0.3 and v0.1 names).

The a2a-sdk dispatcher parses and answers JSON-RPC; around it Keel authenticates the
caller, checks the content type (-32005), accepts the v0.1 `tasks/send`, and reports
invalid v0.3 params as -32602.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import ServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from keel.api.a2a.admission import UnknownAgent, admit
from keel.api.a2a.errors import UNAVAILABLE_CODE, watch_unavailable
from keel.api.a2a.handler import KeelA2AHandler
from keel.api.a2a.rest_binding import REST_SUFFIX, rest_routes
from keel.api.a2a.tasks import INPUT_MODES
from keel.api.core.errors import OverQuota, Unauthenticated, Unavailable
from keel.api.core.router import routable, router_agent
from keel.api.core.service import KeelService
from keel.api.events.line_safe import LineSafeStream
from keel.api.http.conditional import conditional_json
from keel.api.http.errors import headers_of
from keel.api.identity.auth import Principal
from keel.worker.agent_catalog import AgentCatalog
from keel.workflows.run.agent_spec import AgentSpec

log = logging.getLogger("keel.api.a2a")

PROTOCOL_VERSION = "1.0"
# How long a client may use a card without asking again; ETag makes the asking cheap.
CARD_MAX_AGE_S = 300
JSON_TYPES = ("application/json", "application/a2a+json")
V03_METHODS = {
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list",
    "tasks/pushNotificationConfig/delete",
    "agent/getAuthenticatedExtendedCard",
}


class _PrincipalContext(ServerCallContextBuilder):
    """Carries the authenticated caller and the addressed agent into the handler."""

    def build(self, request: Request) -> ServerCallContext:
        headers = dict(request.headers)
        if getattr(request.state, "v03_method", False):
            # A v0.3 method name says which version the client speaks, whatever its
            # A2A-Version header claims; the SDK would answer a mismatch with -32603.
            headers.pop("a2a-version", None)
        return ServerCallContext(
            state={
                "principal": request.state.principal,
                "agent": request.path_params.get("agent"),
                "headers": headers,
            }
        )


def _skill(agent: AgentSpec) -> AgentSkill:
    return AgentSkill(
        id=agent.name,
        name=agent.name,
        description=agent.description or agent.name,
        tags=["code", *agent.tools[:3]],
        examples=[f"Ask the {agent.name} agent about this repository."],
        input_modes=list(INPUT_MODES),
        output_modes=["text/markdown", "text/plain"],
    )


def agent_card(
    base_url: str,
    catalog: AgentCatalog,
    agent: str | None = None,
    *,
    auth: bool = True,
    offered: list[AgentSpec] | None = None,
) -> AgentCard:
    """The v1.0 card: one skill per agent the caller may use (`offered`, the catalogue if
    not given), or the one agent addressed.

    With auth off (KEEL_AUTH=off) it declares no security scheme, since none is enforced.
    """
    # The router (`auto`) is addressable like any agent, and a skill of the root card.
    listed = catalog.all() if offered is None else offered
    agents = [routable(catalog, agent)] if agent else [*listed, router_agent()]
    url = f"{base_url}/a2a/{agent}" if agent else f"{base_url}/a2a"
    card = AgentCard(
        name=f"Keel {agent}" if agent else "Keel",
        description=(
            agents[0].description
            if agent and agents[0]
            else "Durable LLM agents on Temporal: code review, investigation and changes "
            "that wait for approval. Every task survives restarts."
        ),
        version="0.1.0",
        # One endpoint speaks both: v1.0 method names and the v0.3 ones; the HTTP+JSON
        # binding (v1.0) is beside it (api/a2a/rest_binding.py).
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
            AgentInterface(
                url=f"{url}{REST_SUFFIX}",
                protocol_binding="HTTP+JSON",
                protocol_version=PROTOCOL_VERSION,
            ),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=list(INPUT_MODES),
        default_output_modes=["text/markdown", "text/plain"],
        skills=[_skill(a) for a in agents if a is not None],
    )
    if not auth:
        return card
    card.security_schemes["bearer"].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="bearer",
                bearer_format="JWT",
                description="A JWT with tenant_id and sub claims.",
            )
        )
    )
    card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))
    return card


def card_v10(card: AgentCard) -> dict[str, Any]:
    data: dict[str, Any] = MessageToDict(card)
    return data


def card_v03(card: AgentCard) -> dict[str, Any]:
    compat = to_compat_agent_card(card)
    data: dict[str, Any] = compat.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def card_for_both(card: AgentCard) -> dict[str, Any]:
    """The v1.0 card plus the v0.3 fields it lacks, so clients of either version read it."""
    merged = card_v10(card)
    for key, value in card_v03(card).items():
        merged.setdefault(key, value)
    return merged


def _unavailable(request_id: Any, exc: Unavailable) -> JSONResponse:
    """What REST answers 503 (429 over a quota) with `Retry-After`, in JSON-RPC: the same
    status and header, and -32000 (a server error a client may retry) with the service's
    sentence."""
    if type(request_id) not in (str, int):
        request_id = None
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": UNAVAILABLE_CODE, "message": exc.message},
        },
        status_code=429 if isinstance(exc, OverQuota) else 503,
        headers=headers_of(exc),
    )


def _rpc_error(request_id: Any, code: int, message: str, status: int = 200) -> JSONResponse:
    if status < 400:  # a 4xx gets its line from the API's `ClientErrorLog`
        log.info("JSON-RPC request %s refused: %s %s", request_id, code, message)
    return JSONResponse(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}},
        status_code=status,
    )


class MalformedRequest(ValueError):
    """A body the JSON-RPC layer cannot take as it is: `code` is the JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# Deeper than any A2A message is (protobuf refuses past 100 levels, Python's JSON parser
# fails past about 1,000 with a RecursionError); refused before either sees it.
MAX_JSON_DEPTH = 64


def _parsed(raw: bytes) -> Any:
    """The body as JSON, no deeper than MAX_JSON_DEPTH, or `MalformedRequest`."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:  # brackets outside strings: cheap, and before any recursive parser
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                raise MalformedRequest(
                    -32600,
                    f"The request nests JSON more than {MAX_JSON_DEPTH} levels deep; "
                    "send a flatter request.",
                )
        elif byte in (0x5D, 0x7D):
            depth -= 1
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise MalformedRequest(-32700, "The body is not valid JSON.") from exc


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedRequest(-32602, f"{where} must be a JSON object, not {_kind(value)}.")
    return value


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    names[int] = "a number"
    return names.get(type(value), "a number" if isinstance(value, float) else "null")


V03_PART_KINDS = ("text", "file", "data")


def _check_v03_parts(body: Any) -> None:
    """A v0.3 part says what it is in `kind`, and a file part carries base64 `bytes`. The
    SDK's conversion to v1.0 would take a part without `kind` for text and fail on bad
    bytes with an internal error, so refuse both first as invalid params."""
    params = body.get("params") if isinstance(body, dict) else None
    message = params.get("message") if isinstance(params, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    for i, part in enumerate(parts if isinstance(parts, list) else []):
        if isinstance(part, dict) and part.get("kind") not in V03_PART_KINDS:
            given = f"is {part['kind']!r}" if "kind" in part else "is missing"
            raise MalformedRequest(
                -32602,
                f"params.message.parts[{i}].kind {given}; an A2A 0.3 part names its kind: "
                f"{', '.join(V03_PART_KINDS)}.",
            )
        file = part.get("file") if isinstance(part, dict) else None
        data = file.get("bytes") if isinstance(file, dict) else None
        if not isinstance(data, str):
            continue
        try:
            base64.b64decode(data, validate=True)
        except ValueError as exc:  # binascii.Error, or a non-ASCII string
            raise MalformedRequest(
                -32602, f"params.message.parts[{i}].file.bytes is not valid base64: {exc}."
            ) from exc


def _v01_to_v03(body: dict[str, Any]) -> dict[str, Any]:
    """`tasks/send` (A2A 0.1) as `message/send` (0.3); `MalformedRequest` (-32602) when
    its params are not the shapes 0.1 names."""
    params = dict(_object(body.get("params"), "params"))
    message = dict(_object(params.get("message"), "params.message"))
    message.setdefault("messageId", f"v01-{body.get('id')}")
    parts = message.get("parts", [])
    if not isinstance(parts, list):
        raise MalformedRequest(
            -32602, f"params.message.parts must be an array of parts, not {_kind(parts)}."
        )
    message["parts"] = [
        {
            "kind": part.get("type", part.get("kind", "text")),
            **{k: v for k, v in part.items() if k not in ("type", "kind")},
        }
        for part in (_object(p, f"params.message.parts[{i}]") for i, p in enumerate(parts))
    ]
    message.setdefault("kind", "message")
    session_id = params.get("sessionId")
    if session_id:
        if not isinstance(session_id, str):
            raise MalformedRequest(
                -32602, f"params.sessionId must be a string, not {_kind(session_id)}."
            )
        message.setdefault("contextId", session_id)
    return {**body, "method": "message/send", "params": {"message": message}}


ANONYMOUS_READER = Principal(tenant_id="", subject="anonymous")


async def _card_reader(keel: KeelService, request: Request) -> Principal:
    """Who reads a card: the token's caller, or (no token, or one refused) no roles."""
    header = request.headers.get("authorization")
    if header is None and keel.auth_mode != "off":
        return ANONYMOUS_READER
    try:
        return await keel.authenticate(
            header,
            path=request.url.path,
            client=request.client.host if request.client else None,
        )
    except (Unauthenticated, Unavailable):
        return ANONYMOUS_READER


def a2a_routes(state: Any, base_url: str) -> list[BaseRoute]:
    """The A2A routes on the app's `state`, where its lifespan puts the service."""

    def service() -> KeelService:
        built: KeelService = state.service
        return built

    handler = KeelA2AHandler(service)
    dispatcher = JsonRpcDispatcher(
        request_handler=handler, context_builder=_PrincipalContext(), enable_v0_3_compat=True
    )

    async def rpc(request: Request) -> Response:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in JSON_TYPES:
            return _rpc_error(
                None,
                -32005,
                f"Content type {content_type or '(none)'} is not supported; send application/json.",
            )
        try:
            await admit(service(), request)
        except Unauthenticated as exc:
            return JSONResponse(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": exc.message}},
                status_code=401,
                headers=headers_of(exc),
            )
        except Unavailable as exc:
            return _unavailable(None, exc)
        except UnknownAgent as exc:
            return JSONResponse({"detail": exc.message}, status_code=404)
        raw = await request.body()
        body: Any = None
        try:
            body = _parsed(raw)
            method = body.get("method") if isinstance(body, dict) else None
            if method == "tasks/send":
                body = _v01_to_v03(body)
                request._body = json.dumps(body).encode()
                method = "message/send"
            if method in ("message/send", "message/stream"):
                _check_v03_parts(body)
        except MalformedRequest as exc:
            request_id = body.get("id") if isinstance(body, dict) else None
            if type(request_id) not in (str, int):
                request_id = None
            return _rpc_error(request_id, exc.code, exc.message)
        request.state.v03_method = method in V03_METHODS
        with watch_unavailable() as unavailable:
            response = await dispatcher.handle_requests(request)
        if unavailable and isinstance(response, JSONResponse):
            return _unavailable(body.get("id") if isinstance(body, dict) else None, unavailable[0])
        if method in V03_METHODS and isinstance(response, JSONResponse):
            return _params_error_as_32602(response, body)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return LineSafeStream(response)
        return response

    async def built(request: Request) -> AgentCard | None:
        """The card for the caller: the agents their roles may use (a card read without a
        token offers only the agents open to everyone)."""
        agent = request.path_params.get("agent")
        keel = service()
        catalog = keel.catalog
        user = await _card_reader(keel, request)
        offered = keel.access.usable(user)
        if agent is not None and (
            routable(catalog, agent) is None
            or (agent != router_agent().name and keel.access.lookup(agent, user) is None)
        ):
            return None
        root = str(request.base_url).rstrip("/") if not base_url else base_url
        return agent_card(root, catalog, agent, auth=keel.auth_mode != "off", offered=offered)

    async def card(request: Request) -> Response:
        """The domain's well-known card is read by v0.3 and v1.0 clients alike: both shapes.

        An agent's own card is Keel's, so it is the pure v1.0 card; its v0.3 shape is
        beside it at `agent.json`, as at the root.
        """
        found = await built(request)
        if found is None:
            return JSONResponse({"detail": f"No agent {request.path_params['agent']}."}, 404)
        if "agent" in request.path_params:
            return cached(request, card_v10(found))
        return cached(request, card_for_both(found))

    async def card_legacy(request: Request) -> Response:
        found = await built(request)
        if found is None:
            return JSONResponse({"detail": f"No agent {request.path_params['agent']}."}, 404)
        return cached(request, card_v03(found))

    def cached(request: Request, data: dict[str, Any]) -> Response:
        """Cards change only when the agent definitions are loaded again (a restart)."""
        loaded = service().catalog.loaded_at
        response = conditional_json(request, data, last_modified=loaded, max_age_s=CARD_MAX_AGE_S)
        if request.headers.get("authorization"):
            # A card read with a token is that caller's: no shared cache may keep it.
            response.headers["Cache-Control"] = f"private, max-age={CARD_MAX_AGE_S}"
        response.headers["Vary"] = "Authorization"
        return response

    return [
        *rest_routes(handler, _PrincipalContext(), service),
        # A client may join "/" to the interface URL; both spellings are the endpoint.
        Route("/a2a", rpc, methods=["POST"]),
        Route("/a2a/", rpc, methods=["POST"]),
        Route("/a2a/{agent}", rpc, methods=["POST"]),
        Route("/a2a/{agent}/", rpc, methods=["POST"]),
        Route("/.well-known/agent-card.json", card, methods=["GET"]),
        Route("/.well-known/agent.json", card_legacy, methods=["GET"]),
        Route("/a2a/{agent}/.well-known/agent-card.json", card, methods=["GET"]),
        Route("/a2a/{agent}/.well-known/agent.json", card_legacy, methods=["GET"]),
    ]


def _params_error_as_32602(response: JSONResponse, body: Any) -> Response:
    """The SDK's v0.3 adapter reports unparseable params as -32600; the spec says -32602.

    That adapter logs no line for the errors it answers (the v1.0 dispatcher logs one
    warning each), so the warning is written here.
    """
    try:
        data = json.loads(bytes(response.body))
    except ValueError:
        return response
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        log.info("v0.3 JSON-RPC request refused: %s", error.get("code"))
    well_formed = (
        isinstance(body, dict)
        and body.get("jsonrpc") == "2.0"
        and isinstance(body.get("method"), str)
        # An id of another type makes the request itself invalid (-32600), not its params.
        and (body.get("id") is None or type(body.get("id")) in (str, int))
    )
    if isinstance(error, dict) and error.get("code") == -32600 and well_formed:
        error["code"] = -32602
        return JSONResponse(data, status_code=response.status_code)
    return response
