"""Dependencies the routers receive: the Temporal client, the store, settings, agents."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from temporalio.client import Client

from activities.store import Store
from worker.agent_catalog import AgentCatalog
from worker.settings import Settings


def _temporal(request: Request) -> Client:
    return request.app.state.temporal  # type: ignore[no-any-return]


def _store(request: Request) -> Store:
    return request.app.state.store  # type: ignore[no-any-return]


def _settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def _catalog(request: Request) -> AgentCatalog:
    return request.app.state.catalog  # type: ignore[no-any-return]


TemporalDep = Annotated[Client, Depends(_temporal)]
StoreDep = Annotated[Store, Depends(_store)]
SettingsDep = Annotated[Settings, Depends(_settings)]
CatalogDep = Annotated[AgentCatalog, Depends(_catalog)]
