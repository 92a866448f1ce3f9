"""Tool activities: execute a validated tool call, store its output, return a digest."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path
from typing import Any, TypeVar

from jsonschema.validators import validator_for
from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.credentials.secret_store import SecretStore
from keel.activities.heartbeats import with_heartbeats
from keel.activities.masking import ReadableCopies, call_place
from keel.activities.plugin_api import PluginCode, PluginTool, ToolContext, call_plugin
from keel.activities.store.audit import AuditEntry, AuditLog, policy_entry
from keel.activities.store.findings_store import FindingsLedger
from keel.activities.store.held_output_store import HeldOutputStore
from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.mcp_tool_store import McpToolStore
from keel.activities.store.run_store import Store
from keel.activities.store.workspace_tree_store import WorkspaceTrees
from keel.activities.tool_events import tool_events
from keel.activities.tools.acting_tools import Begin
from keel.activities.tools.file_tools import ToolOutput
from keel.activities.tools.implementations import ToolContext as BuiltinContext
from keel.activities.tools.implementations import implementation_of
from keel.activities.tools.mcp_client import McpClient
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.workspace import Workspace
from keel.activities.tools.workspace_roots import Tenancy, WorkspaceRoots
from keel.activities.tools.workspace_tree import WorkspaceTreeRecorder
from keel.workflows.activity_refs import ToolCalls
from keel.workflows.gate.tool_specs import TOOL_SPECS
from keel.workflows.run.step_models import ToolCallInput, ToolDigest

log = logging.getLogger("keel.tools")

# Schema problems shown to the model for one call.
MAX_ARGUMENT_PROBLEMS = 5
# A regular tool activity heartbeats this often, so a dead worker's call is retried soon.
# How long the thread running a tool waits for Postgres to record that it starts.
START_RECORD_TIMEOUT_S = 60.0
# A plugin tool's answer beyond this is cut (the context budget caps what the model sees).
MAX_PLUGIN_OUTPUT_CHARS = 1_000_000

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
        plugins: PluginCode | None = None,
        tenancy: Tenancy = "shared",
        secrets: SecretStore | None = None,
        workspace_trees: bool = False,
        readable: ReadableCopies | None = None,
    ) -> None:
        self._store = store
        self._readable = readable or ReadableCopies.off()
        self._interactions = interactions
        self._audit = audit
        self._roots = WorkspaceRoots(allowed_root, tenancy)
        self._mcp = mcp
        self._sandbox = sandbox
        self._mcp_tools = McpToolStore(store.pool)
        self._plugins = plugins
        self._held = HeldOutputStore(store.pool)
        self._findings = FindingsLedger(store.pool)
        self._secrets = secrets
        self._trees = WorkspaceTreeRecorder(WorkspaceTrees(store.pool), enabled=workspace_trees)

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolDigest:
        if not _repeatable(call):
            stored = await self._stored_digest(call)
            if stored is not None:
                return stored
        # A read is safe to run again: storing its answer finds one a retry left (`answer`).
        refused = await self._outside_the_tenant(call)
        if refused is not None:
            return await self._record(call, refused)
        writes = call.name in TOOL_SPECS and TOOL_SPECS[call.name].risk in ("write", "exec")
        if writes:
            await self._trees.before_write(call.run_id, Path(call.workspace))
        output = await with_heartbeats(
            self._execute_once(
                call, acting=call.name in TOOL_SPECS and not TOOL_SPECS[call.name].read_only
            )
        )
        if writes:
            await self._trees.after_write(call.run_id, call.step, Path(call.workspace))
        if output.findings:
            # Before the answer is stored: a retry after that answers from the store, and
            # one before it records the same rows again, which the ledger's key ignores.
            await self._findings.record(call.run_id, "tool", call.step, call.ord, output.findings)
        return await self._record(call, output)

    @activity.defn(name="run_mcp_tool")
    async def run_mcp_tool(self, call: ToolCallInput) -> ToolDigest:
        """Call a tool of an MCP server, claimed first like every acting call."""
        stored = await self._stored_digest(call)
        if stored is not None:
            return stored
        output = await self._call_mcp_tool(call)
        return await self._record(call, output)

    @activity.defn(name="run_plugin_tool")
    async def run_plugin_tool(self, call: ToolCallInput) -> ToolDigest:
        """Run an installed plugin's tool; an acting one is claimed first, like every other."""
        stored = await self._stored_digest(call)
        if stored is not None:
            return stored
        refused = await self._outside_the_tenant(call)
        if refused is not None:
            return await self._record(call, refused)
        output = await with_heartbeats(self._call_plugin_tool(call))
        digest = await self._record(call, output)
        if call.secret_ref is not None and self._secrets is not None:
            await self._secrets.discard(call.secret_ref)  # used once, with the output stored
        return digest

    async def _call_plugin_tool(self, call: ToolCallInput) -> ToolOutput:
        tool = self._plugins.tool(call.name) if self._plugins is not None else None
        if tool is None:
            return ToolOutput(
                text=(
                    f"Error: the plugin that provides {call.name} is not installed on the "
                    "worker that took this call, so it did not run."
                ),
                is_error=True,
            )
        try:
            args = tool.args_model.model_validate_json(call.arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()[:MAX_ARGUMENT_PROBLEMS]
            )
            return ToolOutput(
                text=(
                    f"Error: invalid arguments for {call.name}: {problems}. "
                    "Fix the arguments to match the tool's schema and call it again."
                ),
                is_error=True,
            )
        workspace = self._workspace_of(call)
        if isinstance(workspace, ToolOutput):
            return workspace
        if not tool.read_only:
            claimant = uuid.uuid4().hex
            answered = await self._claim_or_answer(call, claimant)
            if answered is not None:
                return answered
            if not await self._store.execution_starts(call.run_id, call.step, call.ord, claimant):
                return ToolOutput(text=UNKNOWN_OUTCOME.format(tool=call.name), is_error=True)
        elif call.interaction_id is not None:
            await self._interactions.mark(
                call.run_id, call.interaction_id, "executing", when="approved"
            )
        secret = None
        if call.secret_ref is not None:
            secret = (
                await self._secrets.get(call.secret_ref, call.tenant_id, call.run_id)
                if self._secrets is not None
                else None
            )
            if secret is None:
                return ToolOutput(
                    text=f"Error: the secret given for {call.name} is gone; it did not run.",
                    is_error=True,
                )
        context = ToolContext(
            run_id=call.run_id, tenant_id=call.tenant_id, workspace=workspace, secret=secret
        )
        return await _run_plugin_tool(tool, args, context)

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

        # The run's own record says whose run it is: a scheduled run's is its owner's.
        record = await self._store.get_run(call.run_id)
        acting_for = (record.tenant_id, record.requester) if record is not None else None
        return await self._mcp.call_tool(
            tool.url, tool.tool, arguments, before_call=claim_and_start, acting_for=acting_for
        )

    async def _stored_digest(self, call: ToolCallInput) -> ToolDigest | None:
        """A retry after the output was stored (or held): answer from the store, run nothing.

        A worker that died between storing the output and ending the approval it executed
        left that `executing`: the retry ends it, as the stored output says."""
        stored = await self._store.get_message(call.run_id, call.step, call.ord)
        if stored is None:
            held = (
                await self._held.get(call.run_id, call.step, call.ord) if call.hold_output else None
            )
            return ToolDigest(is_error=held[1]) if held is not None else None
        await self._end_interaction(call, is_error=stored.is_error)
        repeats = await self._store.output_repeats(call.run_id, call.step, stored.sha256 or "")
        return ToolDigest(is_error=stored.is_error, stale=repeats)

    async def _record(self, call: ToolCallInput, output: ToolOutput) -> ToolDigest:
        """Store the output as the call's tool message, with its two events.

        An output for `tool.after` hooks is held aside instead: `answer_held` stores what
        the hooks leave of it."""
        if call.hold_output:
            await self._held.hold(call.run_id, call.step, call.ord, output.text, output.is_error)
            return ToolDigest(is_error=output.is_error)
        return await self.answer(call, output)

    async def held_output(self, call: ToolCallInput) -> ToolOutput | None:
        """The output held for hooks; None once it has been answered (or was never held)."""
        held = await self._held.get(call.run_id, call.step, call.ord)
        return ToolOutput(text=held[0], is_error=held[1]) if held is not None else None

    async def stored_digest(self, call: ToolCallInput) -> ToolDigest | None:
        """The digest of a call already answered, or None."""
        return await self._stored_digest(call.model_copy(update={"hold_output": False}))

    async def answer_held(self, call: ToolCallInput, output: ToolOutput) -> ToolDigest:
        """Store what the hooks left of a held output as the answer, and drop the held one."""
        digest = await self.answer(call, output)
        await self._held.release(call.run_id, call.step, call.ord)
        return digest

    async def answer(self, call: ToolCallInput, output: ToolOutput) -> ToolDigest:
        """Store `output` as the call's answer: its tool message and events (masked by the
        policy, the originals sealed first).

        An answer an earlier attempt stored stays: the digest is that answer's."""
        readable = await self._readable.call(
            call_place(call), call.arguments, output.text, note=call.note
        )
        stored = await self._store.answer_tool_call(
            run_id=call.run_id,
            step=call.step,
            ord_=call.ord,
            call_id=call.call_id,
            name=call.name,
            # A call the approver changed: the model reads what changed before the output.
            content=readable.content,
            is_error=output.is_error,
            events=tool_events(
                call.event_seq,
                step=call.step,
                call_id=call.call_id,
                name=call.name,
                arguments=readable.arguments,
                output=readable.output,
                is_error=output.is_error,
            ),
        )
        is_error = output.is_error if stored.stored_error is None else stored.stored_error
        await self._end_interaction(call, is_error=is_error)
        return ToolDigest(is_error=is_error, stale=stored.repeats)

    async def _end_interaction(self, call: ToolCallInput, *, is_error: bool) -> None:
        """The approval the call executed is `executed` (or `failed`) once its output is
        stored; a no-op when it has no approval or has ended already."""
        if call.interaction_id is None:
            return
        final = "failed" if is_error else "executed"
        marked = await self._interactions.mark(
            call.run_id, call.interaction_id, final, when="executing"
        )
        if not marked:  # refused before it started: invalid arguments, server down
            await self._interactions.mark(call.run_id, call.interaction_id, final, when="approved")

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
                    arguments=await self._readable.arguments(call_place(call), call.arguments),
                )
            )
        if call.interaction_id is not None:
            await self._interactions.mark(
                call.run_id, call.interaction_id, "executing", when="approved"
            )
        return None

    async def _outside_the_tenant(self, call: ToolCallInput) -> ToolOutput | None:
        """The error (audited) for a run whose workspace lies in another tenant's directory:
        whatever started it (a schedule made before the boundary, a session, a sub-agent),
        no tool of it runs there."""
        owner = self._roots.owner(Path(call.workspace))
        if owner is None or owner == call.tenant_id:
            return None
        await self._audit.append_once(
            AuditEntry(
                tenant_id=call.tenant_id,
                actor="system",
                category="tenancy",
                action="workspace.cross_tenant_denied",
                severity="warning",
                subject=f"{call.run_id}/{call.step}/{call.ord}",
                detail={"kind": "workspace", "tool": call.name},
            )
        )
        return ToolOutput(
            text=f"Error: the run's workspace {call.workspace} is not one of this tenant's "
            "workspaces, so no tool runs there. Start the run again in one of them.",
            is_error=True,
        )

    def _workspace_of(self, call: ToolCallInput) -> Workspace | ToolOutput:
        """The run's workspace, or the error the model gets when it is not a usable one."""
        root = Path(call.workspace).resolve()
        if not self._roots.holds(call.tenant_id, root):
            return ToolOutput(
                text=f"Error: the run's workspace {root} is outside the allowed root"
                + (" of this tenant's workspaces." if self._roots.per_tenant else "."),
                is_error=True,
            )
        try:
            return Workspace(root)
        except ValueError as exc:
            return ToolOutput(text=f"Error: {exc}", is_error=True)

    def _execute(self, call: ToolCallInput, begin: Begin) -> ToolOutput:
        spec = TOOL_SPECS.get(call.name)
        implementation = implementation_of(spec) if spec is not None else None
        if implementation is None:
            raise ApplicationError(f"No implementation of tool {call.name}", non_retryable=True)
        workspace = self._workspace_of(call)
        if isinstance(workspace, ToolOutput):
            return workspace
        context = BuiltinContext(
            workspace=workspace, sandbox=self._sandbox, network=call.network, begin=begin
        )
        return implementation.run(context, call.arguments)


def _repeatable(call: ToolCallInput) -> bool:
    """A built-in read no person approved and no hook holds: running it again after a
    crash changes nothing, so it need not ask the store first whether it ran."""
    spec = TOOL_SPECS.get(call.name)
    return (
        spec is not None and spec.read_only and call.interaction_id is None and not call.hold_output
    )


def _go() -> bool:
    return True


async def _run_plugin_tool(tool: PluginTool, args: object, context: ToolContext) -> ToolOutput:
    """The plugin's answer; what it raises is the call's error, told to the model."""
    try:
        text = await call_plugin(tool.run, args, context)
    except Exception as exc:  # the plugin's failure is the call's, not the worker's
        log.warning("plugin tool %s failed: %s", tool.name, type(exc).__name__)
        return ToolOutput(text=f"Error: {tool.name} failed: {exc}", is_error=True)
    text = text if isinstance(text, str) else str(text)
    if len(text) > MAX_PLUGIN_OUTPUT_CHARS:
        text = text[:MAX_PLUGIN_OUTPUT_CHARS] + f"\n[cut at {MAX_PLUGIN_OUTPUT_CHARS} characters]"
    return ToolOutput(text=text)


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
