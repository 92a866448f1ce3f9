"""The activities the workflows call, declared where the workflows can see them.

Workflows may not import `activities/` (dependencies point api -> worker ->
activities -> workflows), so each activity is declared here: a protocol per
implementation class, whose methods carry the activity's name and its one model
in and one model out. Workflows call them by reference
(`run_activity(LlmCalls.llm_step, ...)`), never by a string; the classes in
`activities/` subclass these protocols and register their methods under the same
names. `tests/unit/test_activity_refs.py` fails if a name, an argument model or a
result model drifts apart.

A declaration's body never runs: a worker registers the implementation.
"""

from __future__ import annotations

from typing import Protocol

from temporalio import activity

from keel.workflows.agent_roles import AgentRolesCheck, AgentRolesInput
from keel.workflows.context.models import CompactionInput, CompactionResult
from keel.workflows.coordinator.models import DelegateHandle, DelegateInput, FollowInput
from keel.workflows.gate.hook_models import (
    AfterHooksInput,
    BeforeHooksInput,
    BeforeHooksResult,
    RunEndInput,
)
from keel.workflows.gate.mcp_models import McpDiscoveryInput, McpDiscoveryResult
from keel.workflows.interactions.models import (
    OpenInteractionsInput,
    ResolveInteractionInput,
    ResolveInteractionResult,
)
from keel.workflows.memory.models import RecallInput, RecallResult, RememberInput, RememberResult
from keel.workflows.retention.models import PurgeBatchInput, PurgeBatchResult
from keel.workflows.router.models import (
    AdoptChildInput,
    AdoptedChild,
    CandidatesInput,
    CandidatesResult,
    Classification,
    ClassifyInput,
    Dispatchability,
    DispatchInput,
    RecordRouteInput,
)
from keel.workflows.run.coverage_plan import (
    CoverageClose,
    CoverageSummary,
    ListWorkspaceInput,
    PartsNoteInput,
    WorkspaceListing,
)
from keel.workflows.run.models import FinishRunInput, FinishRunResult, StartRunInput
from keel.workflows.run.step_models import LlmStepInput, LlmStepResult, ToolCallInput, ToolDigest
from keel.workflows.run.subagent_models import ChildEventInput, OpenSubagentInput, SubagentPlan
from keel.workflows.sessions.models import SessionRulesInput, SessionRulesResult
from keel.workflows.usage.quota_models import QuotaCheck, QuotaCheckInput
from keel.workflows.webhooks.models import (
    PushTargets,
    PushTargetsInput,
    WebhookDelivery,
    WebhookReceipt,
)

__all__ = [
    "A2ADelegation",
    "AgentMemory",
    "ContextCompaction",
    "Coverage",
    "InteractionRecords",
    "LlmCalls",
    "McpDiscovery",
    "PluginHooks",
    "RetentionPurges",
    "Routing",
    "RunRecords",
    "Subagents",
    "ToolCalls",
    "WebhookDeliveries",
]


class LlmCalls(Protocol):
    """Model calls over the conversation stored in Postgres (`keel.activities.llm.step`)."""

    @activity.defn(name="llm_step")
    async def llm_step(self, step: LlmStepInput) -> LlmStepResult:
        """One chat completion; the message goes to the store, a digest comes back."""
        ...


class AgentMemory(Protocol):
    """What users stated, recalled in their later runs (`activities.memory`)."""

    @activity.defn(name="recall_memories")
    async def recall_memories(self, request: RecallInput) -> RecallResult:
        """Store the user's memories relevant to the run's input as a note it sends."""
        ...

    @activity.defn(name="remember_facts")
    async def remember_facts(self, request: RememberInput) -> RememberResult:
        """Ask the model for facts worth keeping; store them de-duplicated and redacted."""
        ...


class ContextCompaction(Protocol):
    """Summaries that replace a conversation too long for the window (`activities.context`)."""

    @activity.defn(name="compact_context")
    async def compact_context(self, job: CompactionInput) -> CompactionResult:
        """Summarise the run's conversation before a step; store it, answer with figures."""
        ...


class ToolCalls(Protocol):
    """Tool calls that store their output and answer with a digest (`activities.tools`)."""

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolDigest:
        """A built-in tool, in the run's workspace."""
        ...

    @activity.defn(name="run_mcp_tool")
    async def run_mcp_tool(self, call: ToolCallInput) -> ToolDigest:
        """A tool of an external MCP server, claimed before it is called."""
        ...

    @activity.defn(name="run_plugin_tool")
    async def run_plugin_tool(self, call: ToolCallInput) -> ToolDigest:
        """A tool of an installed plugin; acting ones claimed before they run."""
        ...


class PluginHooks(Protocol):
    """Hooks of installed plugins, every decision audited (`activities.hooks`)."""

    @activity.defn(name="tool_before_hooks")
    async def tool_before_hooks(self, request: BeforeHooksInput) -> BeforeHooksResult:
        """Each hook judges one step's calls: allow, deny with a reason, or ask."""
        ...

    @activity.defn(name="tool_after_hooks")
    async def tool_after_hooks(self, request: AfterHooksInput) -> ToolDigest:
        """Annotate or redact a held output, then store it as the call's answer."""
        ...

    @activity.defn(name="run_end_hooks")
    async def run_end_hooks(self, request: RunEndInput) -> None:
        """Tell each hook how the run ended."""
        ...


class McpDiscovery(Protocol):
    """What the agent's MCP servers offer, at a run's start (`activities.tools`)."""

    @activity.defn(name="discover_mcp_tools")
    async def discover_mcp_tools(self, request: McpDiscoveryInput) -> McpDiscoveryResult:
        """List the servers' tools; store their definitions, answer with their names."""
        ...


class RunRecords(Protocol):
    """The run's row, opening messages and terminal event (`activities.run_records`)."""

    @activity.defn(name="start_run")
    async def start_run(self, start: StartRunInput) -> None:
        """Record the run as running, with its opening messages."""
        ...

    @activity.defn(name="finish_run")
    async def finish_run(self, finish: FinishRunInput) -> FinishRunResult:
        """Record the outcome and the terminal event."""
        ...


class InteractionRecords(Protocol):
    """Interactions mirrored in Postgres, with events and audit (`activities.interactions`)."""

    @activity.defn(name="open_interactions")
    async def open_interactions(self, request: OpenInteractionsInput) -> None:
        """Persist new requests, emit and audit them."""
        ...

    @activity.defn(name="resolve_interaction")
    async def resolve_interaction(
        self, request: ResolveInteractionInput
    ) -> ResolveInteractionResult:
        """Store a decision or an expiry unless another took first; answer what is stored."""
        ...

    @activity.defn(name="session_rules")
    async def session_rules(self, request: SessionRulesInput) -> SessionRulesResult:
        """What `approve_always` granted in a session."""
        ...


class Coverage(Protocol):
    """Keel's coverage plan: workspace, parts' answers, ledger (`activities.coverage`)."""

    @activity.defn(name="list_workspace")
    async def list_workspace(self, request: ListWorkspaceInput) -> WorkspaceListing:
        """Every file with its size, lines and what marks it binary or generated."""
        ...

    @activity.defn(name="note_parts")
    async def note_parts(self, note: PartsNoteInput) -> None:
        """The parts' answers, as a message the run's next model call sends."""
        ...

    @activity.defn(name="close_coverage")
    async def close_coverage(self, close: CoverageClose) -> CoverageSummary:
        """The ledger over the run's tree, stored on the run with its coverage section."""
        ...


class Subagents(Protocol):
    """A sub-agent run's record, and its parent's events about it (`activities.subagents`)."""

    @activity.defn(name="open_subagent")
    async def open_subagent(self, child: OpenSubagentInput) -> SubagentPlan:
        """Record the child run and its prompt; answer with its agent, model and workspace."""
        ...

    @activity.defn(name="record_child_event")
    async def record_child_event(self, event: ChildEventInput) -> None:
        """One `child_run` event in the parent's stream."""
        ...


class WebhookDeliveries(Protocol):
    """Signed notices to a run's webhook (`keel.activities.webhooks.delivery`)."""

    @activity.defn(name="deliver_webhook")
    async def deliver_webhook(self, delivery: WebhookDelivery) -> WebhookReceipt:
        """POST one notice; a refusal no retry can change ends the delivery."""
        ...

    @activity.defn(name="push_targets")
    async def push_targets(self, request: PushTargetsInput) -> PushTargets:
        """The A2A push configs of a run's task, as they are when a notice is sent."""
        ...


class A2ADelegation(Protocol):
    """Tasks sent to other agents over A2A (`keel.activities.a2a.client`)."""

    @activity.defn(name="a2a_send")
    async def a2a_send(self, request: DelegateInput) -> DelegateHandle:
        """Send the task; answer with the agent's task as it first stands."""
        ...

    @activity.defn(name="a2a_follow")
    async def a2a_follow(self, request: FollowInput) -> DelegateHandle:
        """Follow the task until it finishes or its deadline passes."""
        ...


class RetentionPurges(Protocol):
    """Emptying runs past their tenant's retention (`keel.activities.retention.activities`)."""

    @activity.defn(name="purge_expired_runs")
    async def purge_expired_runs(self, batch: PurgeBatchInput) -> PurgeBatchResult:
        """One batch per tenant: remove, audit, report whether more is left."""
        ...


class Routing(Protocol):
    """The capability router's I/O (`keel.activities.router.activities`); its decisions are
    pure code."""

    @activity.defn(name="route_candidates")
    async def route_candidates(self, request: CandidatesInput) -> CandidatesResult:
        """The rule filter: the tenant's enabled agents that the caller's roles may use."""
        ...

    @activity.defn(name="classify_route")
    async def classify_route(self, request: ClassifyInput) -> Classification:
        """One model call that picks a candidate, asks back, or finds none; schema-checked."""
        ...

    @activity.defn(name="check_dispatch")
    async def check_dispatch(self, request: DispatchInput) -> Dispatchability:
        """Whether the agent exists on the workers and its tools can run there."""
        ...

    @activity.defn(name="record_route")
    async def record_route(self, request: RecordRouteInput) -> None:
        """Persist the decision, emit `route_decision` and audit it, once per round."""
        ...

    @activity.defn(name="adopt_child_result")
    async def adopt_child_result(self, request: AdoptChildInput) -> AdoptedChild:
        """Make the routed child's report the router run's, and say how the child ended."""
        ...


class AgentRoles(Protocol):
    """Whether whom a scheduled run acts for may use its agent (`activities.agent_access`)."""

    @activity.defn(name="check_agent_roles")
    async def check_agent_roles(self, request: AgentRolesInput) -> AgentRolesCheck:
        """The agent's `roles:` against the run's acting roles; a refusal is audited."""
        ...


class TenantQuotas(Protocol):
    """Whether a scheduled run's tenant is within its quotas (`activities.quotas`)."""

    @activity.defn(name="check_tenant_quota")
    async def check_tenant_quota(self, request: QuotaCheckInput) -> QuotaCheck:
        """The tenant's and requester's quotas against their counters; a refusal is audited."""
        ...
