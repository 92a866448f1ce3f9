"""Tool activities: execute a validated tool call, store its output, return a digest."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from jsonschema.validators import validator_for
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.store.audit import AuditLog, policy_entry
from activities.store.interaction_store import InteractionStore
from activities.store.mcp_tool_store import McpToolStore
from activities.store.run_store import Store
from activities.tool_events import tool_events
from activities.tools.acting_tools import Begin
from activities.tools.file_tools import ToolOutput
from activities.tools.implementations import ToolContext, implementation_of
from activities.tools.mcp_client import McpClient
from activities.tools.sandbox import Sandbox
from activities.tools.workspace import Workspace
from workflows.activity_refs import ToolCalls
from workflows.models import ToolCallInput, ToolDigest
from workflows.tool_specs import TOOL_SPECS

log = logging.getLogger("keel.tools")

# Schema problems shown to the model for one call.
MAX_ARGUMENT_PROBLEMS = 5
# A regular tool activity heartbeats this often, so a dead worker's call is retried soon.
HEARTBEAT_EVERY_S = 2.0
# How long the thread running a tool waits for Postgres to record that it starts.
START_RECORD_TIMEOUT_S = 60.0

T = TypeVar("T")

UNKNOWN_OUTCOME = (
    "Error: the worker stopped after this {tool} call had started, so whether it took "
    "effect is unknown. It was not run again. Check the workspace before deciding what to do."
)


class ToolActivities(ToolCalls):
    """Runs tools inside workspaces under one allowed root."""

    def __init__(
        self,
        store: Store,
        interactions: InteractionStore,
        audit: AuditLog,
        allowed_root: Path,
        *,
        mcp: McpClient,
        sandbox: Sandbox,
    ) -> None:
        self._store = store
        self._interactions = interactions
        self._audit = audit
        self._allowed_root = allowed_root.resolve()
        self._mcp = mcp
        self._sandbox = sandbox
        self._mcp_tools = McpToolStore(store.pool)

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolDigest:
        stored = await self._stored_digest(call)
        if stored is not None:
            return stored
        output = await _with_heartbeats(
            self._execute_once(
                call, acting=call.name in TOOL_SPECS and not TOOL_SPECS[call.name].read_only
            )
        )
        return await self._record(call, output)

    @activity.defn(name="run_mcp_tool")
    async def run_mcp_tool(self, call: ToolCallInput) -> ToolDigest:
        """Call a tool of an MCP server, claimed first like every acting call."""
        stored = await self._stored_digest(call)
        if stored is not None:
            return stored
        output = await self._call_mcp_tool(call)
        return await self._record(call, output)

    async def _call_mcp_tool(self, call: ToolCallInput) -> ToolOutput:
        tool = await self._mcp_tools.get(call.run_id, call.name)
        if tool is None:
            return ToolOutput(
                text=f"Error: {call.name} is not among the tools discovered for this run.",
                is_error=True,
            )
        arguments = json.loads(call.arguments or "{}")
        problems = _schema_problems(tool.input_schema, arguments)
        if problems:
            return ToolOutput(
                text=(
                    f"Error: invalid arguments for {call.name}: {'; '.join(problems)}. "
                    "Fix the arguments to match the tool's schema and call it again."
                ),
                is_error=True,
            )
        claimant = uuid.uuid4().hex

        async def claim_and_start() -> ToolOutput | None:
            answered = await self._claim_or_answer(call, claimant)
            if answered is None and not await self._store.execution_starts(
                call.run_id, call.step, call.ord, claimant
            ):
                return ToolOutput(text=UNKNOWN_OUTCOME.format(tool=call.name), is_error=True)
            return answered

        return await self._mcp.call_tool(
            tool.url, tool.tool, arguments, before_call=claim_and_start
        )

    async def _stored_digest(self, call: ToolCallInput) -> ToolDigest | None:
        """A retry after the output was stored: answer from the store, run nothing."""
        stored = await self._store.get_message(call.run_id, call.step, call.ord)
        if stored is None:
            return None
        repeats = await self._store.output_repeats(call.run_id, call.step, stored.sha256 or "")
        return ToolDigest(is_error=stored.is_error, stale=repeats)

    async def _record(self, call: ToolCallInput, output: ToolOutput) -> ToolDigest:
        """Store the output as the call's tool message, with its two events."""
        repeats = await self._store.put_tool_message(
            run_id=call.run_id,
            step=call.step,
            ord_=call.ord,
            call_id=call.call_id,
            name=call.name,
            content=output.text,
            is_error=output.is_error,
            events=tool_events(
                call.event_seq,
                step=call.step,
                call_id=call.call_id,
                name=call.name,
                arguments=call.arguments,
                output=output.text,
                is_error=output.is_error,
            ),
        )
        if call.interaction_id is not None:
            final = "failed" if output.is_error else "executed"
            marked = await self._interactions.mark(
                call.run_id, call.interaction_id, final, when="executing"
            )
            if not marked:  # refused before it started: invalid arguments, server down
                await self._interactions.mark(
                    call.run_id, call.interaction_id, final, when="approved"
                )
        return ToolDigest(is_error=output.is_error, stale=repeats)

    async def _execute_once(self, call: ToolCallInput, *, acting: bool) -> ToolOutput:
        """Run the call; an acting call that may already have run is not run again.

        An acting call is claimed first and recorded as started right before its first
        effect, so a retry after a crash tells the two apart: claimed but never started
        runs now; started reports that its outcome is unknown.
        """
        begin: Begin = _go
        if acting:
            claimant = uuid.uuid4().hex
            answered = await self._claim_or_answer(call, claimant)
            if answered is not None:
                return answered
            loop = asyncio.get_running_loop()

            def record_start() -> bool:  # called from the tool's thread
                starts = self._store.execution_starts(call.run_id, call.step, call.ord, claimant)
                return asyncio.run_coroutine_threadsafe(starts, loop).result(START_RECORD_TIMEOUT_S)

            begin = record_start

        elif call.interaction_id is not None:
            await self._interactions.mark(
                call.run_id, call.interaction_id, "executing", when="approved"
            )
        return await asyncio.to_thread(self._execute, call, begin)

    async def _claim_or_answer(self, call: ToolCallInput, claimant: str) -> ToolOutput | None:
        """Claim an acting call, audit who allowed it; an answer if it had started before."""
        if not await self._store.claim_execution(call.run_id, call.step, call.ord, claimant):
            return ToolOutput(text=UNKNOWN_OUTCOME.format(tool=call.name), is_error=True)
        if call.allowed_by is not None:
            await self._audit.append_once(
                policy_entry(
                    call.tenant_id,
                    f"{call.run_id}/{call.step}/{call.ord}",
                    "tool.allowed_by_policy",
                    tool=call.name,
                    rule=call.allowed_by,
                    arguments=call.arguments,
                )
            )
        if call.interaction_id is not None:
            await self._interactions.mark(
                call.run_id, call.interaction_id, "executing", when="approved"
            )
        return None

    def _execute(self, call: ToolCallInput, begin: Begin) -> ToolOutput:
        spec = TOOL_SPECS.get(call.name)
        implementation = implementation_of(spec) if spec is not None else None
        if implementation is None:
            raise ApplicationError(f"No implementation of tool {call.name}", non_retryable=True)
        root = Path(call.workspace).resolve()
        if not root.is_relative_to(self._allowed_root):
            return ToolOutput(
                text=f"Error: the run's workspace {root} is outside the allowed root.",
                is_error=True,
            )
        try:
            workspace = Workspace(root)
        except ValueError as exc:
            return ToolOutput(text=f"Error: {exc}", is_error=True)
        context = ToolContext(
            workspace=workspace, sandbox=self._sandbox, network=call.network, begin=begin
        )
        return implementation.run(context, call.arguments)


def _go() -> bool:
    return True


async def _with_heartbeats(work: Awaitable[T]) -> T:
    """Heartbeat while a tool runs, so a dead worker's call is retried within seconds."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_EVERY_S)
            if done:
                return task.result()
            if not activity.info().is_local:  # a local activity lives inside a workflow task
                activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()


def _schema_problems(schema: dict[str, Any], arguments: object) -> list[str]:
    """What is wrong with `arguments` by the tool's JSON schema; a broken schema checks nothing."""
    try:
        validator_class = validator_for(schema)
        validator_class.check_schema(schema)
        errors = sorted(
            validator_class(schema).iter_errors(arguments),
            key=lambda e: [str(part) for part in e.absolute_path],
        )
    except Exception as exc:  # a server's broken schema: the server judges the arguments
        log.warning("unusable input schema, arguments not checked: %s", exc)
        return []
    return [
        f"{'.'.join(str(part) for part in error.absolute_path) or 'arguments'}: {error.message}"
        for error in errors[:MAX_ARGUMENT_PROBLEMS]
    ]
