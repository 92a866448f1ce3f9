"""Secrets the run asks its user for (`secret_ref` interactions), holding only references.

Two kinds. A plugin tool with a `secret_prompt` asks before each call it makes: answered,
the call runs with the reference, and the tool activity takes the value by it; declined
or expired, the model is told and the call does not run.

Credentials for backends called as the user: discovery lists the agent's MCP servers'
tools as the run's user. A server called as the user for which the user has no
credential (nothing granted yet, or a refresh token the backend refused) is not a
failure: `RunSecrets` opens a `secret_ref`
interaction per such server, which only the user may answer; the API keeps the
secret sealed and the run holds only its reference, which discovery takes again to
store the credential as the user's and list the server's tools. Unanswered (expired
or rejected), the server is left out as one that is down, and the gate says so.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import InteractionRecords, McpDiscovery
    from keel.workflows.gate.gate import GateDecision
    from keel.workflows.gate.mcp_models import CredentialAsk, McpDiscoveryInput, McpDiscoveryResult
    from keel.workflows.gate.models import GateResult
    from keel.workflows.interactions.models import Interaction, OpenInteractionsInput
    from keel.workflows.run import subagents
    from keel.workflows.run.interactions import RunInteractions
    from keel.workflows.run.models import RunInput, RunState
    from keel.workflows.run.notices import RunNotices
    from keel.workflows.run.subagent_runs import RunSubagents

__all__ = ["CREDENTIALS_PATCH", "TOOL_SECRET_PATCH", "RunSecrets", "SecretHost"]

CREDENTIALS_PATCH = "user-credentials-secret-ref"
TOOL_SECRET_PATCH = "plugin-tool-secret-ref"
# Ordinals of credential asks, apart from any step's tool calls (which start at 2).
FIRST_ASK_ORD = 900
# A call's own secret request: its ordinal plus this, apart from its approval's id.
CALL_ASK_OFFSET = 500


class SecretHost(Protocol):
    _state: RunState

    def _take_seqs(self, count: int) -> int: ...

    async def _record_opening(self) -> None: ...


class RunSecrets:
    """Asks the run's user for secrets: credentials discovery lacks, a tool's secret."""

    def __init__(
        self,
        host: SecretHost,
        interactions: RunInteractions,
        notices: RunNotices,
        subagent_runs: RunSubagents,
    ) -> None:
        self._host = host
        self._interactions = interactions
        self._notices = notices
        self._subagents = subagent_runs

    async def discover(self, run: RunInput) -> McpDiscoveryResult:
        request = McpDiscoveryInput(run_id=run.run_id, servers=run.agent.mcp_servers)
        if not workflow.patched(CREDENTIALS_PATCH):
            return await self._discover(request)
        request.tenant_id, request.requester = run.tenant_id, run.requester
        found = await self._discover(request)
        if not found.needs_credential:
            return found
        refs = await self._ask(run, found.needs_credential)
        if refs:
            found = await self._discover(request.model_copy(update={"credential_refs": refs}))
        # Servers still without a credential (declined, expired) are left out as down.
        return found.model_copy(
            update={
                "unavailable": [*found.unavailable, *(a.server for a in found.needs_credential)],
                "needs_credential": [],
            }
        )

    async def ask_for_call(
        self, run: RunInput, ord_: int, decision: GateDecision
    ) -> str | GateResult | None:
        """A plugin tool with a `secret_prompt`: ask the user, then run with the reference.

        None: the call needs no secret. A `GateResult` answers the model when the user
        declined or let the request expire; the call does not run."""
        spec = decision.spec
        if spec is None or spec.group != "plugin":
            return None
        ref = next((t for t in run.agent.plugin_tools if t.name == decision.call.name), None)
        if ref is None or ref.secret_prompt is None or not workflow.patched(TOOL_SECRET_PATCH):
            return None
        step = self._host._state.step
        ask_ord = CALL_ASK_OFFSET + ord_
        now = workflow.now()
        interaction = Interaction(
            id=subagents.interaction_id(run.run_id, run.parent_run_id, step, ask_ord),
            kind="secret_ref",
            step=step,
            ord=ask_ord,
            call_id=decision.call.call_id,
            tool=decision.call.name,
            arguments=decision.canonical_arguments,
            payload_hash=decision.payload_hash,
            risk=spec.risk,
            subject=decision.subject,
            question=ref.secret_prompt,
            requester=run.requester,
            approvers=[run.requester],
            created_at=now,
            expires_at=now + self._expires_after(run),
        )
        [opened] = await self._open(run, [interaction], f"ask a secret for {ref.name}")
        await self._settled(run, opened)
        if opened.status == "answered" and opened.answer:
            return opened.answer
        why = "declined to give" if opened.status == "rejected" else "did not give in time"
        return GateResult(
            step=step,
            ord=ord_,
            call_id=decision.call.call_id,
            name=decision.call.name,
            arguments=decision.canonical_arguments,
            content=(
                f"Error: the user {why} the secret {decision.call.name} needs, so it did not "
                "run. Do not call it again unless the user asks you to."
            ),
            is_error=True,
            event_seq=self._host._take_seqs(2),
        )

    @staticmethod
    def _expires_after(run: RunInput) -> timedelta:
        return timedelta(seconds=run.approval_expires_after_s or run.agent.approval.expires_after_s)

    async def _open(
        self, run: RunInput, interactions: list[Interaction], summary: str
    ) -> list[Interaction]:
        for interaction in interactions:
            self._host._state.interactions[interaction.id] = interaction
        await run_activity(
            InteractionRecords.open_interactions,
            OpenInteractionsInput(
                run_id=run.run_id,
                tenant_id=run.tenant_id,
                session_id=run.session_id,
                interactions=interactions,
                event_seq=self._host._take_seqs(len(interactions)),
            ),
            timeouts.STORE_CALL,
            local=True,
            summary=summary,
        )
        # Told like an approval: the run's webhook, and a sub-agent's parent.
        await self._notices.notify(run, "waiting", interactions=interactions)
        await self._subagents.tell_parent(run)
        return interactions

    async def _settled(self, run: RunInput, interaction: Interaction) -> None:
        await self._interactions.await_decision(interaction)
        await self._subagents.tell_parent(run)

    async def _discover(self, request: McpDiscoveryInput) -> McpDiscoveryResult:
        return await run_activity(McpDiscovery.discover_mcp_tools, request, timeouts.MCP_DISCOVERY)

    async def _ask(self, run: RunInput, asks: list[CredentialAsk]) -> dict[str, str]:
        """One `secret_ref` interaction per server; server → reference, for those answered."""
        await self._host._record_opening()  # the interactions belong to a recorded run
        now = workflow.now()
        step = self._host._state.step
        asked: list[Interaction] = []
        for i, ask in enumerate(asks):
            ord_ = FIRST_ASK_ORD + i
            subject = f"credential for {ask.server}"
            asked.append(
                Interaction(
                    id=subagents.interaction_id(run.run_id, run.parent_run_id, step, ord_),
                    kind="secret_ref",
                    step=step,
                    ord=ord_,
                    call_id=f"credential-{ask.server}",
                    tool=f"mcp__{ask.server}",
                    arguments="{}",
                    payload_hash=hashlib.sha256(subject.encode()).hexdigest(),
                    risk="external",
                    subject=subject,
                    question=ask.prompt,
                    requester=run.requester,
                    approvers=[run.requester],  # a credential is the user's own to give
                    created_at=now,
                    expires_at=now + self._expires_after(run),
                )
            )
        opened = await self._open(run, asked, "ask for credentials")
        refs: dict[str, str] = {}
        for ask, interaction in zip(asks, opened, strict=True):
            await self._settled(run, interaction)
            if interaction.status == "answered" and interaction.answer:
                refs[ask.server] = interaction.answer
        return refs
