"""`KeelService`: what users do, for every surface.

REST routers, A2A, MCP and the CLI's local paths all call this one object, built once
in the API's lifespan, so they cannot drift apart: a run starts, a decision takes, a
refusal is audited and a caller is authenticated the same way whichever door it came
in by. Its parts raise the domain errors of `api.core.errors`; each surface renders them.
"""

from __future__ import annotations

from keel.api.core.codec import CodecService
from keel.api.core.context import CoreParts
from keel.api.core.coordinations.service import CoordinationService
from keel.api.core.decisions import DecisionService
from keel.api.core.evals import EvalService
from keel.api.core.memories import MemoryService
from keel.api.core.push_configs import PushConfigService
from keel.api.core.retention import RetentionService
from keel.api.core.router import RouterService
from keel.api.core.run_list import RunListing
from keel.api.core.runs import RunService
from keel.api.core.schedules.service import ScheduleService
from keel.api.core.sessions import SessionService
from keel.api.core.workspace_reads import WorkspaceReads
from keel.api.identity.auth import Principal
from keel.api.identity.authenticate import Authenticator


class KeelService:
    """Runs, sessions, decisions, schedules, retention, the payload codec, workspace
    reads and eval results, and who may use them."""

    def __init__(self, parts: CoreParts, authenticator: Authenticator) -> None:
        self.parts = parts
        self.runs = RunService(parts)
        self.sessions = SessionService(parts, self.runs)
        self.decisions = DecisionService(parts, self.runs)
        self.schedules = ScheduleService(parts, self.runs)
        self.codec = CodecService(parts)
        self.retention = RetentionService(parts)
        self.memories = MemoryService(parts)
        self.workspaces = WorkspaceReads(parts)
        self.push_configs = PushConfigService(parts, self.runs)
        self.evals = EvalService(parts)
        self.router = RouterService(parts, self.runs)
        self.access = self.runs.access  # which agents a caller may use (`roles:`)
        self.run_list = RunListing(parts, self.runs)
        self.coordinations = CoordinationService(parts)
        self._authenticator = authenticator

    @property
    def auth_mode(self) -> str:
        return self._authenticator.config.mode

    async def authenticate(self, header: str | None, *, path: str, client: str | None) -> Principal:
        """The verified caller of a request; refusals are audited."""
        return await self._authenticator(header, path=path, client=client)
