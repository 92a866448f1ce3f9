"""`KeelService`: what users do, for every surface.

REST routers, A2A, MCP, LangGraph, AG-UI, the console and the CLI's local paths all
call this one object, built once in the API's lifespan (`api.core.assembly`), so they
cannot drift apart: a run starts, a decision takes, a refusal is audited and a caller
is authenticated the same way whichever door it came in by. It is the only thing a
surface holds — its parts (stores, Temporal, the audit log, the event hub) stay
private — and it raises the domain errors of `api.core.errors`; each surface renders
them in its own protocol.
"""

from __future__ import annotations

from keel.activities.store.console_reads import ConsoleReads
from keel.api.core.audit_reads import AuditReads
from keel.api.core.codec import CodecService
from keel.api.core.console_access import ConsoleAccess
from keel.api.core.context import CoreParts
from keel.api.core.coordinations.service import CoordinationService
from keel.api.core.decisions import DecisionService
from keel.api.core.evals import EvalService
from keel.api.core.forks import ForkService
from keel.api.core.health import HealthChecks
from keel.api.core.inbox import Inbox
from keel.api.core.memories import MemoryService
from keel.api.core.originals import OriginalReads
from keel.api.core.push_configs import PushConfigService
from keel.api.core.retention import RetentionService
from keel.api.core.router import RouterService
from keel.api.core.run_events import RunEvents
from keel.api.core.run_list import RunListing
from keel.api.core.runs import RunService
from keel.api.core.schedules.service import ScheduleService
from keel.api.core.sessions import SessionService
from keel.api.core.task_reads import TaskReads
from keel.api.core.threads import ThreadService
from keel.api.core.token_exchange import TokenExchange
from keel.api.core.tool_outputs import ToolOutputs
from keel.api.core.usage import UsageReads
from keel.api.core.webhook_secrets import WebhookSecrets
from keel.api.core.workspace_reads import WorkspaceReads
from keel.api.events.hub import EventHub
from keel.api.identity.auth import Principal
from keel.api.identity.authenticate import Authenticator
from keel.worker.agent_catalog import AgentCatalog


class KeelService:
    """Runs, sessions and threads, decisions, schedules, events, the inbox, audit and
    usage reads, retention, the payload codec, workspace reads and eval results, and
    who may use them."""

    def __init__(
        self,
        parts: CoreParts,
        authenticator: Authenticator,
        console: ConsoleAccess,
        hub: EventHub | None = None,
    ) -> None:
        self._parts = parts
        reads = ConsoleReads(parts.store.pool)
        self.runs = RunService(parts)
        self.sessions = SessionService(parts, self.runs)
        self.grants = self.runs.grants  # `approve_always` grants: list, revoke
        self.decisions = DecisionService(parts, self.runs)
        self.threads = ThreadService(parts, self.sessions, self.runs, self.decisions)
        self.schedules = ScheduleService(parts, self.runs)
        self.events = RunEvents(parts.store, hub)
        self.tasks = TaskReads(parts)
        self.inbox = Inbox(parts)
        self.audit = AuditReads(parts)
        self.usage = UsageReads(parts, reads)
        self.tool_outputs = ToolOutputs(self.runs, reads)
        self.webhooks = WebhookSecrets(parts)
        self.health = HealthChecks(parts)
        self.codec = CodecService(parts)
        self.retention = RetentionService(parts)
        self.memories = MemoryService(parts)
        self.workspaces = WorkspaceReads(parts)
        self.push_configs = PushConfigService(parts, self.runs)
        self.evals = EvalService(parts)
        self.router = RouterService(parts, self.runs)
        self.access = self.runs.access  # which agents a caller may use (`roles:`)
        self.quotas = self.runs.quotas  # tenant quotas: set by admins, checked at each start
        self.run_list = RunListing(parts, self.runs)
        self.forks = ForkService(parts, self.runs)
        self.coordinations = CoordinationService(parts)
        self.originals = OriginalReads(parts, self.runs)  # masked values, read-original only
        self.console = console
        self._authenticator = authenticator
        self.token_exchange = TokenExchange(
            parts.settings, authenticator.config.issued_secret, parts.audit
        )

    @property
    def catalog(self) -> AgentCatalog:
        """Every agent definition loaded (what a caller may use is `access`'s to say)."""
        return self._parts.catalog

    @property
    def default_agent(self) -> str:
        """The agent a request that names none speaks to (KEEL_A2A_DEFAULT_AGENT)."""
        return self._parts.settings.a2a_default_agent

    @property
    def auth_mode(self) -> str:
        return self._authenticator.config.mode

    async def authenticate(self, header: str | None, *, path: str, client: str | None) -> Principal:
        """The verified caller of a request; refusals are audited."""
        return await self._authenticator(header, path=path, client=client)
