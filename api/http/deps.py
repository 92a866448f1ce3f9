"""Dependencies the routers receive: clients, stores, settings, agents and the caller."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from temporalio.client import Client

from activities.store.interaction_store import InteractionStore
from activities.store.run_store import Store
from activities.store.session_store import SessionStore
from api.core.audit_trail import ApiAudit
from api.identity.auth import AuthError, KeySetUnavailable, Principal, principal_from_request
from worker.agent_catalog import AgentCatalog
from worker.settings import Settings


def _temporal(request: Request) -> Client:
    return request.app.state.temporal  # type: ignore[no-any-return]


def _store(request: Request) -> Store:
    return request.app.state.store  # type: ignore[no-any-return]


def _interactions(request: Request) -> InteractionStore:
    return request.app.state.interactions  # type: ignore[no-any-return]


def _sessions(request: Request) -> SessionStore:
    return request.app.state.sessions  # type: ignore[no-any-return]


def _audit(request: Request) -> ApiAudit:
    return request.app.state.audit  # type: ignore[no-any-return]


def _settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def _catalog(request: Request) -> AgentCatalog:
    return request.app.state.catalog  # type: ignore[no-any-return]


async def current_user(request: Request) -> Principal:
    """The verified caller of a request; 401 (audited) without a valid token."""
    state = request.app.state
    header = request.headers.get("authorization")
    try:
        if state.auth_config.jwks_url:
            # Fetching the key set is network I/O; keep it off the event loop.
            return await asyncio.to_thread(
                principal_from_request, header, state.verifier, state.auth_config.mode
            )
        return principal_from_request(header, state.verifier, state.auth_config.mode)
    except KeySetUnavailable as exc:
        raise HTTPException(503, detail=exc.message) from exc
    except AuthError as exc:
        client = request.client.host if request.client else None
        await state.audit.auth_refused(exc.message, request.url.path, client)
        raise HTTPException(
            401, detail=exc.message, headers={"WWW-Authenticate": "Bearer"}
        ) from exc


async def _admin(user: Annotated[Principal, Depends(current_user)]) -> Principal:
    if not user.is_admin:
        raise HTTPException(403, detail="This endpoint needs the keel:admin scope.")
    return user


TemporalDep = Annotated[Client, Depends(_temporal)]
StoreDep = Annotated[Store, Depends(_store)]
InteractionStoreDep = Annotated[InteractionStore, Depends(_interactions)]
SessionStoreDep = Annotated[SessionStore, Depends(_sessions)]
AuditDep = Annotated[ApiAudit, Depends(_audit)]
SettingsDep = Annotated[Settings, Depends(_settings)]
CatalogDep = Annotated[AgentCatalog, Depends(_catalog)]
CurrentUser = Annotated[Principal, Depends(current_user)]
AdminUser = Annotated[Principal, Depends(_admin)]
