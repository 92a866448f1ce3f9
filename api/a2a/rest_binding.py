"""A2A's HTTP+JSON binding (v1.0), beside JSON-RPC: the a2a-sdk's REST dispatcher, in
front of the same request handler, behind the same authentication and tenancy.

Each agent's binding is at `/a2a/{agent}/rest` (the default agent's at `/a2a/rest`):
`POST …/message:send`, `POST …/message:stream`, `GET …/tasks/{id}`, `GET …/tasks`,
`POST …/tasks/{id}:cancel`, `GET|POST …/tasks/{id}:subscribe` and the push notification
config routes. Errors are the binding's JSON (`{"error": {code, status, message}}`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes.common import ServerCallContextBuilder
from a2a.server.routes.rest_dispatcher import RestDispatcher
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from keel.api.a2a.admission import UnknownAgent, admit
from keel.api.a2a.errors import watch_unavailable
from keel.api.core.errors import Unauthenticated, Unavailable
from keel.api.core.service import KeelService
from keel.api.events.line_safe import LineSafeStream
from keel.api.http.errors import headers_of

__all__ = ["REST_SUFFIX", "rest_routes"]

REST_SUFFIX = "/rest"
"""What an agent's JSON-RPC URL is followed by to name its HTTP+JSON interface."""
Endpoint = Callable[[Request], Awaitable[Response]]
SDK_JSON = "application/a2a+json"


def rest_routes(
    handler: RequestHandler,
    context: ServerCallContextBuilder,
    service: Callable[[], KeelService],
) -> list[BaseRoute]:
    """The binding's routes for every agent and for the default one."""
    dispatcher = RestDispatcher(request_handler=handler, context_builder=context)
    table: dict[tuple[str, str], Endpoint] = {
        ("/message:send", "POST"): dispatcher.on_message_send,
        ("/message:stream", "POST"): dispatcher.on_message_send_stream,
        ("/tasks/{id}:cancel", "POST"): dispatcher.on_cancel_task,
        ("/tasks/{id}:subscribe", "GET"): dispatcher.on_subscribe_to_task,
        ("/tasks/{id}:subscribe", "POST"): dispatcher.on_subscribe_to_task,
        ("/tasks/{id}", "GET"): dispatcher.on_get_task,
        ("/tasks/{id}/pushNotificationConfigs/{push_id}", "GET"): (
            dispatcher.get_push_notification
        ),
        ("/tasks/{id}/pushNotificationConfigs/{push_id}", "DELETE"): (
            dispatcher.delete_push_notification
        ),
        ("/tasks/{id}/pushNotificationConfigs", "POST"): dispatcher.set_push_notification,
        ("/tasks/{id}/pushNotificationConfigs", "GET"): dispatcher.list_push_notifications,
        ("/tasks", "GET"): dispatcher.list_tasks,
    }
    routes: list[BaseRoute] = []
    for prefix in (f"/a2a/{{agent}}{REST_SUFFIX}", f"/a2a{REST_SUFFIX}"):
        for (path, method), endpoint in table.items():
            routes.append(Route(f"{prefix}{path}", _guarded(endpoint, service), methods=[method]))
    return routes


def _guarded(endpoint: Endpoint, service: Callable[[], KeelService]) -> Endpoint:
    """The caller verified and the agent routable before the SDK sees the request (the
    same `admit` as JSON-RPC's); a store outage is the retryable 503 REST gives."""

    async def serve(request: Request) -> Response:
        try:
            await admit(service(), request)
        except Unauthenticated as exc:
            return _error(401, "UNAUTHENTICATED", exc.message, headers_of(exc))
        except Unavailable as exc:
            return _error(503, "UNAVAILABLE", exc.message, headers_of(exc))
        except UnknownAgent as exc:
            return _error(404, "NOT_FOUND", exc.message)
        with watch_unavailable() as unavailable:
            response = await endpoint(request)
        if unavailable and isinstance(response, JSONResponse):
            return _error(503, "UNAVAILABLE", unavailable[0].message, headers_of(unavailable[0]))
        content_type = response.headers.get("content-type", "")
        if content_type.startswith("text/event-stream"):
            return LineSafeStream(response)
        if content_type.startswith(SDK_JSON):
            # The binding's protocol requirements (spec 11.1) name application/json; the
            # SDK answers with the media type of the spec's examples.
            response.headers["content-type"] = "application/json"
        return response

    return serve


def _error(
    status: int, name: str, message: str, headers: dict[str, Any] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": status, "status": name, "message": message}},
        status_code=status,
        headers=headers,
    )
