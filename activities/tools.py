"""Tool activities: execute a validated tool call, store its output, return a digest."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import acting_tools
from activities.audit import AuditEntry, AuditLog
from activities.file_tools import ToolOutput, list_files, read_file, search_code
from activities.interaction_store import InteractionStore
from activities.store import Store
from activities.workspace import Workspace
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

PREVIEW_CHARS = 200
# The workflow only compares digests: a 64-bit prefix of the hash keeps history lean.
DIGEST_HASH_CHARS = 16


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


def digest_of(output: ToolOutput) -> ToolDigest:
    return ToolDigest(
        size=len(output.text.encode()),
        sha256=hashlib.sha256(output.text.encode()).hexdigest()[:DIGEST_HASH_CHARS],
        is_error=output.is_error,
        seen=list(output.seen),
    )


class ToolActivities:
    """Runs tools inside workspaces under one allowed root."""

    def __init__(
        self, store: Store, interactions: InteractionStore, audit: AuditLog, allowed_root: Path
    ) -> None:
        self._store = store
        self._interactions = interactions
        self._audit = audit
        self._allowed_root = allowed_root.resolve()

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolDigest:
        stored = await self._store.get_message(call.run_id, call.step, call.ord)
        if stored is not None:
            # A retry after the output was stored: answer from the store, run nothing.
            if call.lean:
                repeats = await self._store.output_repeats(
                    call.run_id, call.step, stored.sha256 or ""
                )
                return ToolDigest(is_error=stored.is_error, stale=repeats)
            return ToolDigest(
                size=len((stored.content or "").encode()),
                sha256=(stored.sha256 or "")[:DIGEST_HASH_CHARS],
                is_error=stored.is_error,
            )
        output = await self._execute_once(call)
        digest = digest_of(output)
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
                        "size": digest.size,
                        "preview": output.text[:PREVIEW_CHARS],
                    },
                ),
            ],
        )
        if call.interaction_id is not None:
            final = "failed" if output.is_error else "executed"
            await self._interactions.mark(call.run_id, call.interaction_id, final, when="executing")
        if call.lean:
            return ToolDigest(is_error=output.is_error, stale=repeats)
        return digest

    async def _execute_once(self, call: ToolCallInput) -> ToolOutput:
        """Run the call; an acting call that may already have run is not run again."""
        spec = TOOL_SPECS.get(call.name)
        acting = spec is not None and not spec.read_only
        if acting and not await self._store.claim_execution(call.run_id, call.step, call.ord):
            return ToolOutput(text=UNKNOWN_OUTCOME.format(tool=call.name), is_error=True)
        if acting and call.allowed_by is not None:
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
        return await asyncio.to_thread(self._execute, call)

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
