"""Tool activities: execute a validated tool call, store its output, return a digest."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonschema.validators import validator_for
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.store.audit import AuditEntry, AuditLog
from activities.store.interaction_store import InteractionStore
from activities.store.mcp_tool_store import McpToolStore
from activities.store.run_store import Store
from activities.tools import acting_tools
from activities.tools.file_tools import ToolOutput, list_files, read_file, search_code
from activities.tools.mcp_client import McpClient
from activities.tools.workspace import Workspace
from workflows.activity_refs import ToolCalls
from workflows.models import ToolCallInput, ToolDigest
from workflows.tool_specs import (
    TOOL_SPECS,
    BashArgs,
    EditFileArgs,
    ListFilesArgs,
    ReadFileArgs,
    SearchCodeArgs,
    ToolArgs,
    WriteFileArgs,
)

log = logging.getLogger("keel.tools")

PREVIEW_CHARS = 200
# Schema problems shown to the model for one call.
MAX_ARGUMENT_PROBLEMS = 5


def _run_read_file(ws: Workspace, args: ToolArgs) -> ToolOutput:
    assert isinstance(args, ReadFileArgs)
    return read_file(ws, args)


def _run_list_files(ws: Workspace, args: ToolArgs) -> ToolOutput:
    assert isinstance(args, ListFilesArgs)
    return list_files(ws, args)


def _run_search_code(ws: Workspace, args: ToolArgs) -> ToolOutput:
    assert isinstance(args, SearchCodeArgs)
    return search_code(ws, args)


def _run_write_file(ws: Workspace, args: ToolArgs) -> ToolOutput:
    assert isinstance(args, WriteFileArgs)
    return acting_tools.write_file(ws, args)


def _run_edit_file(ws: Workspace, args: ToolArgs) -> ToolOutput:
    assert isinstance(args, EditFileArgs)
    return acting_tools.edit_file(ws, args)


def _run_bash(ws: Workspace, args: ToolArgs) -> ToolOutput:
    assert isinstance(args, BashArgs)
    return acting_tools.bash(ws, args)


EXECUTORS: dict[str, Callable[[Workspace, ToolArgs], ToolOutput]] = {
    "read_file": _run_read_file,
    "list_files": _run_list_files,
    "search_code": _run_search_code,
    "write_file": _run_write_file,
    "edit_file": _run_edit_file,
    "bash": _run_bash,
}

UNKNOWN_OUTCOME = (
    "Error: the worker stopped while this {tool} call was running, so whether it took "
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
    ) -> None:
        self._store = store
        self._interactions = interactions
        self._audit = audit
        self._allowed_root = allowed_root.resolve()
        self._mcp = mcp
        self._mcp_tools = McpToolStore(store.pool)

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolDigest:
        stored = await self._stored_digest(call)
        if stored is not None:
            return stored
        output = await self._execute_once(
            call, acting=call.name in TOOL_SPECS and not TOOL_SPECS[call.name].read_only
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
        return await self._mcp.call_tool(
            tool.url,
            tool.tool,
            arguments,
            before_call=lambda: self._claim_or_answer(call),
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
            events=[
                (
                    call.event_seq,
                    "tool_call",
                    {
                        "step": call.step,
                        "call_id": call.call_id,
                        "name": call.name,
                        "arguments": call.arguments,
                    },
                ),
                (
                    call.event_seq + 1,
                    "tool_result",
                    {
                        "step": call.step,
                        "call_id": call.call_id,
                        "name": call.name,
                        "is_error": output.is_error,
                        "size": len(output.text.encode()),
                        "preview": output.text[:PREVIEW_CHARS],
                    },
                ),
            ],
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
        """Run the call; an acting call that may already have run is not run again."""
        if acting:
            answered = await self._claim_or_answer(call)
            if answered is not None:
                return answered
        elif call.interaction_id is not None:
            await self._interactions.mark(
                call.run_id, call.interaction_id, "executing", when="approved"
            )
        return await asyncio.to_thread(self._execute, call)

    async def _claim_or_answer(self, call: ToolCallInput) -> ToolOutput | None:
        """Claim an acting call, audit who allowed it; an answer if it was claimed before."""
        if not await self._store.claim_execution(call.run_id, call.step, call.ord):
            return ToolOutput(text=UNKNOWN_OUTCOME.format(tool=call.name), is_error=True)
        if call.allowed_by is not None:
            await self._audit.append(
                AuditEntry(
                    tenant_id=call.tenant_id,
                    actor="policy",
                    category="approval",
                    action="tool.allowed_by_policy",
                    subject=f"{call.run_id}/{call.step}/{call.ord}",
                    detail={
                        "tool": call.name,
                        "rule": call.allowed_by,
                        "arguments": call.arguments,
                    },
                )
            )
        if call.interaction_id is not None:
            await self._interactions.mark(
                call.run_id, call.interaction_id, "executing", when="approved"
            )
        return None

    def _execute(self, call: ToolCallInput) -> ToolOutput:
        spec = TOOL_SPECS.get(call.name)
        executor = EXECUTORS.get(call.name)
        if spec is None or executor is None:
            raise ApplicationError(f"No executor for tool {call.name}", non_retryable=True)
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
        args = spec.args_model.model_validate_json(call.arguments)
        return executor(workspace, args)


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
