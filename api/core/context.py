"""What the service's parts share: the clients, stores, catalog, settings and audit trail."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import Client

from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.run_store import Store
from keel.activities.store.session_store import SessionStore
from keel.api.core.audit_trail import ApiAudit
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.config.settings import Settings

# How long a call to Temporal that a user waits on may take before the answer is a 503;
# the Temporal client retries an unreachable server within it.
TEMPORAL_CALL_TIMEOUT = timedelta(seconds=5)
# What a 503 tells a client to wait before retrying (Retry-After), in seconds.
RETRY_AFTER_S = 5


@dataclass(frozen=True)
class CoreParts:
    """Built once in the app's lifespan; every part of the service holds the same."""

    temporal: Client
    store: Store
    interactions: InteractionStore
    sessions: SessionStore
    audit: ApiAudit
    catalog: AgentCatalog
    settings: Settings

    @property
    def namespace(self) -> str:
        """The Temporal namespace the service calls (for errors that name it)."""
        return self.temporal.namespace
