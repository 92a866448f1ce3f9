"""Where the service is put together: Temporal, Postgres, the audit log, the event hub.

The API's lifespan opens the service here and hands surfaces only the service; what it
is made of is opened, migrated, started and closed in this one place.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from keel.activities.store.audit import AuditLog
from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.run_store import Store
from keel.activities.store.session_store import SessionStore
from keel.api.core.audit_trail import ApiAudit
from keel.api.core.console_access import ConsoleAccess, console_sessions
from keel.api.core.context import CoreParts
from keel.api.core.service import KeelService
from keel.api.events.hub import EventHub
from keel.api.identity.authenticate import Authenticator
from keel.api.identity.config import auth_config, build_verifier
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.cluster_check import report_cluster
from keel.worker.config.masking import masker
from keel.worker.config.settings import Settings
from keel.worker.observability.tracing import temporal_plugins
from keel.worker.payload_codec import data_converter
from keel.worker.temporal_client import connect

__all__ = ["open_service"]


@asynccontextmanager
async def open_service(settings: Settings, *, store_wait_s: float) -> AsyncIterator[KeelService]:
    """The service over a connected Temporal client, a migrated store and a listening
    event hub, for as long as the block runs; all of it closed after. A request waits at
    most `store_wait_s` for a database connection."""
    if settings.temporal_address is None or settings.database_url is None:
        raise RuntimeError("The service needs TEMPORAL_ADDRESS and DATABASE_URL resolved.")
    masker(settings)  # a masking policy without its keys stops the API here, as the worker
    temporal = await connect(
        settings.temporal_address,
        settings.temporal_namespace,
        plugins=temporal_plugins(settings),
        data_converter=data_converter(settings),
    )
    await report_cluster(temporal)
    store = await Store.open(settings.database_url, wait_s=store_wait_s)
    audit = ApiAudit(
        AuditLog(store.pool),
        refusals_per_window=settings.audit_refusals_per_window,
        refusal_window_s=settings.audit_refusal_window_s,
    )
    parts = CoreParts(
        temporal=temporal,
        store=store,
        interactions=InteractionStore(store.pool),
        sessions=SessionStore(store.pool),
        audit=audit,
        catalog=AgentCatalog.load(settings.agents_dir, coverage_plans=settings.coverage_plans),
        settings=settings,
    )
    config = auth_config(settings)
    verifier = build_verifier(config)
    console = ConsoleAccess(console_sessions(settings, config), config, verifier, audit)
    hub = EventHub(settings.database_url)
    summaries: asyncio.Task[None] | None = None
    try:
        await store.migrate()
        await hub.start()
        summaries = asyncio.create_task(audit.refusals.run(), name="keel-refusal-summaries")
        yield KeelService(parts, Authenticator(config, verifier, audit), console, hub)
    finally:
        if summaries is not None:
            summaries.cancel()
            await asyncio.gather(summaries, return_exceptions=True)
            await audit.refusals.close()  # what a flood's last window counted
        await hub.stop()
        await store.close()
