"""MCP resources: Keel's agents, the caller's runs and their reports, by URI.

`keel://agents/{name}` is an agent as `GET /v1/agents` shows it, `keel://runs/{run_id}`
a run as `GET /v1/runs/{id}` shows it, and `keel://runs/{run_id}/report` its Markdown
report. `resources/list` names every agent and the caller's most recent runs (with the
report of each finished one); the templates reach any other run of the tenant. Reads
go through the service, so another tenant's run is "No run …", audited, as over REST.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp_types import Resource

from keel.activities.store.records import RunRecord
from keel.api.core.errors import KeelError, NotFound
from keel.api.core.runs import FINISHED
from keel.api.core.schemas.agents import AgentPublic
from keel.api.core.service import KeelService
from keel.api.identity.auth import Principal
from keel.api.mcp_server.tool_errors import refusal
from keel.api.mcp_server.tools import caller

AGENT_URI = "keel://agents/{name}"
RUN_URI = "keel://runs/{run_id}"
REPORT_URI = "keel://runs/{run_id}/report"
# How many of the caller's recent runs resources/list names; the templates reach the rest.
LISTED_RUNS = 50
JSON = "application/json"
MARKDOWN = "text/markdown"


class KeelResources:
    """The resource templates and the caller's listing, bound to the API's one service."""

    def __init__(self, service: KeelService) -> None:
        self._service = service

    @property
    def service(self) -> KeelService:
        return self._service

    def register(self, server: MCPServer[Any]) -> None:
        server.resource(
            AGENT_URI,
            name="agent",
            title="Keel agent",
            description="An agent Keel can run: its description, tools and model.",
            mime_type=JSON,
        )(self.agent)
        server.resource(
            RUN_URI,
            name="run",
            title="Keel run",
            description="A run: status, stop reason, usage, cost, report and what it waits on.",
            mime_type=JSON,
        )(self.run)
        server.resource(
            REPORT_URI,
            name="report",
            title="Keel run report",
            description="The Markdown report of a finished run.",
            mime_type=MARKDOWN,
        )(self.report)

    async def agent(self, name: str, ctx: Context) -> str:
        spec = self._service.access.lookup(name, caller(ctx))
        if spec is None:  # an agent the caller's roles exclude is not theirs to read
            raise ResourceNotFoundError(f"No agent {name}; resources/list names every agent.")
        return AgentPublic.from_spec(spec).model_dump_json(indent=2)

    async def run(self, run_id: str, ctx: Context) -> str:
        runs = self._service.runs
        try:
            public = await runs.live(await runs.get(run_id, caller(ctx)))
        except KeelError as exc:
            raise _resource_error(exc) from None
        return public.model_dump_json(indent=2)

    async def report(self, run_id: str, ctx: Context) -> str:
        try:
            record = await self._service.runs.get(run_id, caller(ctx))
        except KeelError as exc:
            raise _resource_error(exc) from None
        if record.report is None:
            raise ResourceError(
                f"Run {run_id} has no report yet (it is {record.status}); read "
                f"keel://runs/{run_id} to follow it, and this once it has finished."
            )
        return record.report

    async def listed(self, user: Principal) -> list[Resource]:
        """The agents the caller may use, then their recent runs, newest first, each
        finished one followed by its report."""
        agents = [
            Resource(
                uri=AGENT_URI.format(name=a.name),
                name=f"agent {a.name}",
                description=a.description,
                mime_type=JSON,
            )
            for a in self._service.access.usable(user)
        ]
        # The run list users read everywhere: top-level runs, not the sub-agent runs.
        listed = await self._service.run_list.page(user, limit=LISTED_RUNS, before=None)
        return agents + [
            item for run in listed.runs for item in _run_resources(run, listed.status_of(run))
        ]


def _run_resources(run: RunRecord, status: str) -> list[Resource]:
    items = [
        Resource(
            uri=RUN_URI.format(run_id=run.id),
            name=f"run {run.id}",
            description=f"{run.agent} run, {status}, started {run.created_at:%Y-%m-%d %H:%M} UTC.",
            mime_type=JSON,
        )
    ]
    if run.status in FINISHED and run.report is not None:
        items.append(
            Resource(
                uri=REPORT_URI.format(run_id=run.id),
                name=f"report {run.id}",
                description=f"The report of {run.agent} run {run.id}.",
                mime_type=MARKDOWN,
            )
        )
    return items


def _resource_error(exc: KeelError) -> ResourceError:
    """A missing (or another tenant's) run is not found; other refusals keep their sentence."""
    if isinstance(exc, NotFound):
        return ResourceNotFoundError(refusal(exc))
    return ResourceError(refusal(exc))
