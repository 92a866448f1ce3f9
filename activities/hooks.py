"""Plugin hooks as activities: `tool.before`, `tool.after` and `run.end`, each audited.

Hooks run in the fixed order the workflow passes (by plugin, then hook name). What a
hook raises fails the activity, and Temporal retries it (`timeouts.HOOK_CALL`); the
workflow decides what a hook that keeps failing means for the call. A retried
activity runs the hooks again but audits each decision once.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue
from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.plugin_api import (
    AfterDecision,
    BeforeDecision,
    PluginCode,
    PluginHook,
    RunEndView,
    ToolCallView,
    ToolOutputView,
    call_plugin,
)
from keel.activities.store.audit import AuditEntry, AuditLog, AuditSeverity
from keel.activities.tools.file_tools import ToolOutput
from keel.activities.tools.tool_activities import ToolActivities
from keel.workflows import timeouts
from keel.workflows.activity_refs import PluginHooks
from keel.workflows.gate.hook_models import (
    AfterHooksInput,
    BeforeHooksInput,
    BeforeHooksResult,
    HookCall,
    HookVerdict,
    RunEndInput,
)
from keel.workflows.gate.plugin_refs import HookRef
from keel.workflows.run.step_models import ToolDigest

# What the audit keeps of a hook's reason or note.
MAX_AUDIT_TEXT = 500


class HookActivities(PluginHooks):
    """Calls the installed plugins' hooks; stores outputs through the tool activities."""

    def __init__(self, plugins: PluginCode, tools: ToolActivities, audit: AuditLog) -> None:
        self._plugins = plugins
        self._tools = tools
        self._audit = audit

    @activity.defn(name="tool_before_hooks")
    async def tool_before_hooks(self, request: BeforeHooksInput) -> BeforeHooksResult:
        verdicts = [await self._judge(request, call) for call in request.calls]
        return BeforeHooksResult(verdicts=verdicts)

    async def _judge(self, request: BeforeHooksInput, call: HookCall) -> HookVerdict:
        """The first `deny` wins; otherwise any `ask` makes the call ask a person."""
        view = ToolCallView(
            run_id=request.run_id,
            tenant_id=request.tenant_id,
            agent=request.agent,
            tool=call.tool,
            arguments=json.loads(call.arguments or "{}"),
            subject=call.subject,
            risk=call.risk,
        )
        verdict = HookVerdict(ord=call.ord)
        for ref in request.hooks:
            if not ref.applies_to(call.tool):
                continue
            answer = (
                await self._call(
                    ref,
                    request.tenant_id,
                    f"{request.run_id}/{request.step}/{call.ord}",
                    call.tool,
                    view,
                )
                or BeforeDecision()
            )
            if not isinstance(answer, BeforeDecision):
                raise TypeError(
                    f"hook {ref.key} answered {type(answer).__name__}, not BeforeDecision"
                )
            await self._audit_once(
                request.tenant_id,
                f"{request.run_id}/{request.step}/{call.ord}/{ref.key}",
                "hook.tool_before",
                {
                    "hook": ref.key,
                    "tool": call.tool,
                    "action": answer.action,
                    "reason": answer.reason[:MAX_AUDIT_TEXT],
                    "arguments": call.arguments,
                },
                # A refusal is a warning, as a rule's `tool.denied_by_policy` is.
                severity="warning" if answer.action == "deny" else "info",
            )
            if answer.action == "deny":
                return HookVerdict(ord=call.ord, action="deny", hook=ref.key, reason=answer.reason)
            if answer.action == "ask" and verdict.action == "allow":
                verdict = HookVerdict(
                    ord=call.ord, action="ask", hook=ref.key, reason=answer.reason
                )
        return verdict

    @activity.defn(name="tool_after_hooks")
    async def tool_after_hooks(self, request: AfterHooksInput) -> ToolDigest:
        call = request.call
        answered = await self._tools.stored_digest(call)
        if answered is not None:  # a retry after the answer was stored
            return answered
        held = await self._tools.held_output(call)
        if held is None:
            raise ApplicationError(
                f"No output of {call.name} is held for its hooks.", non_retryable=True
            )
        view = ToolCallView(
            run_id=call.run_id,
            tenant_id=call.tenant_id,
            agent=request.agent,
            tool=call.name,
            arguments=json.loads(call.arguments or "{}"),
            subject=request.subject,
            risk=request.risk,
        )
        text, notes = held.text, []
        for ref in request.hooks:
            answer = (
                await self._call(
                    ref,
                    call.tenant_id,
                    f"{call.run_id}/{call.step}/{call.ord}",
                    call.name,
                    view,
                    ToolOutputView(text, held.is_error),
                )
                or AfterDecision()
            )
            if not isinstance(answer, AfterDecision):
                raise TypeError(
                    f"hook {ref.key} answered {type(answer).__name__}, not AfterDecision"
                )
            if answer.text is not None:
                text = answer.text
            if answer.note:
                notes.append(f"[{ref.key}] {answer.note}")
            await self._audit_once(
                call.tenant_id,
                f"{call.run_id}/{call.step}/{call.ord}/{ref.key}",
                "hook.tool_after",
                {
                    "hook": ref.key,
                    "tool": call.name,
                    "replaced": answer.text is not None,
                    "note": (answer.note or "")[:MAX_AUDIT_TEXT],
                    "changes": [c[:MAX_AUDIT_TEXT] for c in answer.changes],
                },
            )
        if notes:
            text = f"{text}\n\n" + "\n".join(notes)
        return await self._tools.answer_held(call, ToolOutput(text=text, is_error=held.is_error))

    @activity.defn(name="run_end_hooks")
    async def run_end_hooks(self, request: RunEndInput) -> None:
        view = RunEndView(
            run_id=request.run_id,
            tenant_id=request.tenant_id,
            agent=request.agent,
            status=request.status,
            stop_reason=request.stop_reason,
            error=request.error,
        )
        for ref in request.hooks:
            await call_plugin(self._hook(ref).run, view)
            await self._audit_once(
                request.tenant_id,
                f"{request.run_id}/{ref.key}",
                "hook.run_end",
                {"hook": ref.key, "status": request.status},
            )

    async def _call(
        self, ref: HookRef, tenant_id: str, call_subject: str, tool: str, *args: Any
    ) -> Any:
        """Run one hook; when it fails for the last time, audit that it refused the call.

        The workflow then refuses the call (`tool.before`) or withholds its output
        (`tool.after`); the entry says which hook failed and why, once."""
        try:
            return await call_plugin(self._hook(ref).run, *args)
        except Exception as exc:
            if activity.info().attempt >= timeouts.HOOK_ATTEMPTS:
                await self._audit_once(
                    tenant_id,
                    f"{call_subject}/{ref.key}",
                    f"hook.{ref.event.replace('.', '_')}_failed",
                    {
                        "hook": ref.key,
                        "tool": tool,
                        "error": f"{type(exc).__name__}: {exc}"[:MAX_AUDIT_TEXT],
                    },
                    severity="warning",
                )
            raise

    def _hook(self, ref: HookRef) -> PluginHook:
        hook = self._plugins.hook(ref.key)
        if hook is None:
            # Another worker may have it: retried, then the workflow refuses the call.
            raise ApplicationError(
                f"The hook {ref.key} is not installed on this worker; install its plugin "
                "on every worker and API process."
            )
        return hook

    async def _audit_once(
        self,
        tenant_id: str,
        subject: str,
        action: str,
        detail: dict[str, Any],
        severity: AuditSeverity = "info",
    ) -> None:
        values: dict[str, JsonValue] = dict(detail)
        await self._audit.append_once(
            AuditEntry(
                tenant_id=tenant_id,
                actor="policy",
                category="hook",
                action=action,
                severity=severity,
                subject=subject,
                detail=values,
            )
        )
