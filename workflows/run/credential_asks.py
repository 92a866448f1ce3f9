"""Credentials the run's user must give before the run can call a backend as them.

Discovery lists the agent's MCP servers' tools as the run's user. A server called as
the user for which the user has no credential (nothing granted yet, or a refresh
token the backend refused) is not a failure: `RunCredentials` opens a `secret_ref`
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
    from keel.workflows.gate.mcp_models import CredentialAsk, McpDiscoveryInput, McpDiscoveryResult
    from keel.workflows.interactions.models import Interaction, OpenInteractionsInput
    from keel.workflows.run import subagents
    from keel.workflows.run.interactions import RunInteractions
    from keel.workflows.run.models import RunInput, RunState

__all__ = ["CREDENTIALS_PATCH", "CredentialHost", "RunCredentials"]

CREDENTIALS_PATCH = "user-credentials-secret-ref"
# Ordinals of credential asks, apart from any step's tool calls (which start at 2).
FIRST_ASK_ORD = 900


class CredentialHost(Protocol):
    _state: RunState

    def _take_seqs(self, count: int) -> int: ...

    async def _record_opening(self) -> None: ...


class RunCredentials:
    """Discovery as the run's user, asking the user for what it lacks."""

    def __init__(self, host: CredentialHost, interactions: RunInteractions) -> None:
        self._host = host
        self._interactions = interactions

    async def discover(self, run: RunInput) -> McpDiscoveryResult:
        request = McpDiscoveryInput(run_id=run.run_id, servers=run.agent.mcp_servers)
        if not workflow.patched(CREDENTIALS_PATCH):
            return await self._discover(request)
        request.tenant_id, request.requester = run.tenant_id, run.requester
        found = await self._discover(request)
        if not found.needs_credential:
            return found
        refs = await self._ask(run, found.needs_credential)
        if not refs:
            return found.model_copy(
                update={
                    "unavailable": [
                        *found.unavailable,
                        *(a.server for a in found.needs_credential),
                    ],
                    "needs_credential": [],
                }
            )
        return await self._discover(request.model_copy(update={"credential_refs": refs}))

    async def _discover(self, request: McpDiscoveryInput) -> McpDiscoveryResult:
        return await run_activity(McpDiscovery.discover_mcp_tools, request, timeouts.MCP_DISCOVERY)

    async def _ask(self, run: RunInput, asks: list[CredentialAsk]) -> dict[str, str]:
        """One `secret_ref` interaction per server; server → reference, for those answered."""
        await self._host._record_opening()  # the interactions belong to a recorded run
        expires_after = timedelta(
            seconds=run.approval_expires_after_s or run.agent.approval.expires_after_s
        )
        now = workflow.now()
        step = self._host._state.step
        opened: list[Interaction] = []
        for i, ask in enumerate(asks):
            ord_ = FIRST_ASK_ORD + i
            subject = f"credential for {ask.server}"
            interaction = Interaction(
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
                expires_at=now + expires_after,
            )
            self._host._state.interactions[interaction.id] = interaction
            opened.append(interaction)
        await run_activity(
            InteractionRecords.open_interactions,
            OpenInteractionsInput(
                run_id=run.run_id,
                tenant_id=run.tenant_id,
                session_id=run.session_id,
                interactions=opened,
                event_seq=self._host._take_seqs(len(opened)),
            ),
            timeouts.STORE_CALL,
            local=True,
            summary="ask for credentials",
        )
        refs: dict[str, str] = {}
        for ask, interaction in zip(asks, opened, strict=True):
            await self._interactions.await_decision(interaction)
            if interaction.status == "answered" and interaction.answer:
                refs[ask.server] = interaction.answer
        return refs
