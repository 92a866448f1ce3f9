"""How an MCP client finds out what token `/mcp` wants (RFC 9728, MCP authorization).

A current MCP client that meets a 401 looks for the resource's protected-resource
metadata, then for its authorization server's metadata, then registers itself there.
With an identity provider (`KEEL_JWKS_URL` and `KEEL_JWT_ISSUER`), Keel publishes the
metadata, naming the issuer as the authorization server, and the 401 points at it.
With the local secret there is no authorization server: Keel mints its own tokens
(`keel token`). Then every step of that discovery, and the registration it ends in,
answers 404 with the sentence that says which header to send, so the client shows
that instead of failing somewhere in an OAuth flow that could never work.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from keel.worker.config.settings import Settings

PRM_PATH = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"
# Where clients look for an authorization server, or register, when the resource names none.
AS_PATHS = (
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/openid-configuration",
    "/.well-known/openid-configuration/mcp",
    "/mcp/.well-known/openid-configuration",
)
REGISTER_PATH = "/register"
LOCAL_HEADER_HELP = (
    "Keel has no OAuth authorization server: it takes the bearer token `keel token` prints, "
    "signed with its local secret. Configure your MCP client to send the header "
    "`Authorization: Bearer <token>` (e.g. from `keel token --ttl 2592000`), or start Keel's "
    "MCP server over stdio with `keel mcp`, which signs in by itself."
)
IDP_HEADER_HELP = (
    "Keel verifies tokens from its identity provider but knows no issuer URL to point you to "
    "(KEEL_JWT_ISSUER is unset): send `Authorization: Bearer <token>` with a token that "
    "provider issued, carrying the tenant_id and sub claims."
)


def authorization_server(settings: Settings) -> str | None:
    """The issuer clients get tokens from, when Keel verifies an identity provider's
    tokens and knows its URL; None with the local secret (or without auth)."""
    issuer = settings.jwt_issuer
    if settings.auth_mode == "off" or settings.jwks_url is None or issuer is None:
        return None
    if urlsplit(issuer).scheme not in ("https", "http"):
        return None
    return issuer


def base_url(settings: Settings, request: Request) -> str:
    """The API's URL as the client reached it, unless KEEL_PUBLIC_URL says otherwise."""
    return (settings.public_url or str(request.base_url)).rstrip("/")


def challenge(settings: Settings, request: Request) -> str:
    """The `WWW-Authenticate` value of a 401 from `/mcp`."""
    if authorization_server(settings) is None:
        return "Bearer"
    return f'Bearer resource_metadata="{base_url(settings, request)}{PRM_PATH}{MCP_PATH}"'


def discovery_routes(settings: Settings) -> list[Route]:
    """The metadata when there is an authorization server; otherwise the sentence."""
    issuer = authorization_server(settings)

    async def metadata(request: Request) -> JSONResponse:
        if issuer is None:
            return _no_authorization_server(settings)
        return JSONResponse(
            {
                "resource": f"{base_url(settings, request)}{MCP_PATH}",
                "authorization_servers": [issuer],
                "bearer_methods_supported": ["header"],
                "scopes_supported": ["keel:admin"],
                "resource_name": "Keel",
                "resource_documentation": f"{base_url(settings, request)}/docs",
            },
            headers={"Cache-Control": "public, max-age=3600"},
        )

    async def none_here(request: Request) -> JSONResponse:
        return _no_authorization_server(settings)

    routes = [
        Route(PRM_PATH, metadata, methods=["GET"]),
        Route(f"{PRM_PATH}{MCP_PATH}", metadata, methods=["GET"]),
    ]
    if issuer is None:
        routes += [Route(path, none_here, methods=["GET"]) for path in AS_PATHS]
        routes.append(Route(REGISTER_PATH, none_here, methods=["POST"]))
    return routes


def _no_authorization_server(settings: Settings) -> JSONResponse:
    help_text = IDP_HEADER_HELP if settings.jwks_url is not None else LOCAL_HEADER_HELP
    return JSONResponse(
        {"error": "not_found", "error_description": help_text, "detail": help_text},
        status_code=404,
    )
