"""Who reaches an agent's A2A interface: the caller verified and the agent one a surface
may address (a catalogue agent, or the router `auto`), for JSON-RPC and the HTTP+JSON
binding alike. Each binding renders the refusal in its own terms."""

from __future__ import annotations

from starlette.requests import Request

from keel.api.core.router import routable
from keel.api.core.service import KeelService
from keel.api.identity.auth import Principal

__all__ = ["UnknownAgent", "admit"]


class UnknownAgent(Exception):
    """The path names no agent a surface may address."""

    def __init__(self, agent: str) -> None:
        super().__init__(agent)
        self.message = f"No agent {agent}."


async def admit(keel: KeelService, request: Request) -> Principal:
    """The request's caller, kept on `request.state` for the SDK's context builder.

    Raises `Unauthenticated` or `Unavailable` from authentication, and `UnknownAgent`
    when the path's agent is neither in the catalogue nor the router. An agent the
    caller's roles exclude is refused by the service when a message starts a run there.
    """
    principal = await keel.authenticate(
        request.headers.get("authorization"),
        path=request.url.path,
        client=request.client.host if request.client else None,
    )
    request.state.principal = principal
    agent = request.path_params.get("agent")
    if agent is not None and routable(keel.catalog, agent) is None:
        raise UnknownAgent(agent)
    return principal
