"""The worker: registers Keel's workflows and activities on a task queue."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import httpx2
import openai
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import (
    Interceptor,
    UnsandboxedWorkflowRunner,
    Worker,
    WorkerDeploymentConfig,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from keel.activities.a2a.client import A2AClientActivities
from keel.activities.agent_access import AgentAccessActivities
from keel.activities.context import CompactionActivities, ContextBudget
from keel.activities.coverage import CoverageActivities
from keel.activities.hooks import HookActivities
from keel.activities.interactions import InteractionActivities
from keel.activities.llm.limits import ProviderLimiter
from keel.activities.llm.providers.anthropic_messages import AnthropicMessages
from keel.activities.llm.step import LlmActivities
from keel.activities.memory.activities import MemoryActivities
from keel.activities.outbound.targets import WebhookTargetPolicy
from keel.activities.quotas.activities import QuotaActivities, QuotaWatch
from keel.activities.quotas.ledger import QUOTA_CACHE_S, QuotaLedger
from keel.activities.retention.activities import RetentionActivities
from keel.activities.router.activities import RouterActivities, sandbox_tool_problem
from keel.activities.run_records import RunRecordActivities
from keel.activities.store.audit import AuditLog
from keel.activities.store.context_store import ContextStore
from keel.activities.store.coverage_store import CoverageStore
from keel.activities.store.grant_store import GrantStore
from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.mcp_tool_store import McpToolStore
from keel.activities.store.memory_store import MemoryStore
from keel.activities.store.outage import StoreOutageInterceptor
from keel.activities.store.provider_limit_store import ProviderLimitStore
from keel.activities.store.push_config_store import PushConfigStore
from keel.activities.store.quota_store import QuotaStore
from keel.activities.store.retention_store import RetentionStore
from keel.activities.store.run_store import Store
from keel.activities.store.run_tree import RunTreeStore
from keel.activities.subagents import SubagentActivities
from keel.activities.tools.mcp_client import McpClient
from keel.activities.tools.mcp_discovery import McpDiscoveryActivities
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.tool_activities import ToolActivities
from keel.activities.tools.workspace_roots import WorkspaceRoots
from keel.activities.webhooks.delivery import WebhookActivities
from keel.worker.agent_catalog import AgentCatalog
from keel.worker.cluster_check import ClusterSetupError, check_cluster
from keel.worker.config.a2a_tokens import A2ATokens, keel_urls
from keel.worker.config.credential_keys import secret_store, user_tokens
from keel.worker.config.masking import readable_copies
from keel.worker.config.settings import Settings
from keel.worker.config.webhook_secret import webhook_server_secret
from keel.worker.observability.log_format import LogContext
from keel.worker.observability.metrics import worker_runtime
from keel.worker.observability.quiet_logs import quiet_expected_failures
from keel.worker.observability.tracing import install_tracing, temporal_plugins, tracing_on
from keel.worker.payload_codec import data_converter
from keel.worker.plugins import PluginRegistry
from keel.worker.temporal_client import connect
from keel.workflows.coordinator.workflow import CoordinatorWorkflow
from keel.workflows.retention.workflow import RetentionWorkflow
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.sessions.workflow import SessionWorkflow
from keel.workflows.webhooks.delivery import WebhookDeliveryWorkflow

log = logging.getLogger("keel.worker")

STICKY_TIMEOUT = timedelta(seconds=5)
# The model client's pool, as the openai client sizes it by default.
LLM_CONNECTIONS = 1000
LLM_IDLE_CONNECTIONS = 100


def openai_client(settings: Settings) -> openai.AsyncOpenAI:
    """Retries belong to Temporal, so the client makes exactly one attempt. Its pool lets
    an idle connection go before the endpoint would (`KEEL_LLM_KEEPALIVE_S`): with both at
    5 s, a call could go out on a connection the server was closing, and fail an attempt."""
    return openai.AsyncOpenAI(
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key.get_secret_value(),
        max_retries=0,
        timeout=settings.llm_timeout_s,
        http_client=openai.DefaultAsyncHttpxClient(limits=model_pool(settings)),
    )


def model_pool(settings: Settings) -> httpx2.Limits:
    """The connection pool of a model client, OpenAI's or Anthropic's."""
    return httpx2.Limits(
        max_connections=LLM_CONNECTIONS,
        max_keepalive_connections=LLM_IDLE_CONNECTIONS,
        keepalive_expiry=settings.llm_keepalive_s,
    )


def anthropic_provider(settings: Settings) -> AnthropicMessages | None:
    """The Messages API adapter, when a key is set; one attempt a call and the same pool,
    like OpenAI's."""
    if settings.anthropic_api_key is None:
        return None
    import anthropic  # only where a key is set: the package costs about 40 MB

    client = anthropic.AsyncAnthropic(
        base_url=settings.anthropic_base_url,
        api_key=settings.anthropic_api_key.get_secret_value(),
        max_retries=0,
        timeout=settings.llm_timeout_s,
        http_client=anthropic.DefaultAsyncHttpxClient(limits=model_pool(settings)),
    )
    return AnthropicMessages(client, settings.anthropic_max_tokens)


def worker_interceptors(settings: Settings) -> list[Interceptor]:
    """Keel's metrics and GenAI spans, each only when configured.

    Temporal's own tracing comes with the client's plugin, its metrics with the
    client's runtime.
    """
    interceptors: list[Interceptor] = []
    if settings.log_format == "json":
        interceptors.append(LogContext())
    if settings.worker_metrics_port is not None:
        from keel.worker.observability.metrics import KeelMetrics

        interceptors.append(KeelMetrics(settings.prices))
    if tracing_on(settings):
        from keel.worker.observability.genai_tracing import GenAiSpans

        install_tracing(settings, "keel-worker")  # Temporal's plugin needs its provider first
        interceptors.append(GenAiSpans(capture_content=settings.otel_capture_message_content))
    return interceptors


@dataclass
class WorkerParts:
    """What a worker owns, so it can close them."""

    worker: Worker
    store: Store
    llm: openai.AsyncOpenAI
    anthropic: AnthropicMessages | None = None

    async def close_clients(self) -> None:
        """The model clients' connections, once the worker has stopped."""
        await self.llm.close()
        if self.anthropic is not None:
            await self.anthropic.close()


def build_worker(client: Client, store: Store, settings: Settings) -> WorkerParts:
    quiet_expected_failures()
    llm = openai_client(settings)
    plugins = installed_plugins()
    # The agents a `task` call may start; a malformed file stops the worker here.
    catalog = AgentCatalog.load(
        settings.agents_dir, plugins, coverage_plans=settings.coverage_plans
    )
    audit = AuditLog(store.pool)
    as_user = user_tokens(settings, store.pool)
    secrets = secret_store(settings, store.pool)
    a2a_activities = A2AClientActivities(
        A2ATokens(settings),
        user_tokens=as_user,
        targets=WebhookTargetPolicy(
            targets=settings.webhook_targets, allow_http=settings.webhook_allow_http
        ),
        keel_urls=keel_urls(settings),
        audit=audit,
    )
    budget = ContextBudget(
        ContextStore(store.pool),
        default_model=settings.model,
        default_window=settings.model_context_window,
        enabled=settings.context_budget,
    )
    messages_api = anthropic_provider(settings)
    quotas = QuotaLedger(QuotaStore(store.pool), cache_s=QUOTA_CACHE_S)
    readable = readable_copies(settings, store)  # a masking policy without keys stops here
    # One limiter for every model call of this worker: steps, compaction, routing, memory.
    limits = ProviderLimiter(ProviderLimitStore(store.pool), settings.provider_limits)
    llm_activities = LlmActivities(
        llm,
        store,
        audit,
        settings.prices,
        budget,
        plugins=plugins,
        anthropic=messages_api,
        quotas=QuotaWatch(quotas),
        limits=limits,
        readable=readable,
    )
    compaction_activities = CompactionActivities(
        llm,
        store,
        budget,
        anthropic=messages_api,
        plugins=plugins,
        prices=settings.prices,
        limits=limits,
    )
    interaction_store = InteractionStore(store.pool)
    mcp = McpClient(settings.mcp_tokens, timeout_s=settings.mcp_timeout_s, user_tokens=as_user)
    sandbox = bash_sandbox(settings)
    tool_activities = ToolActivities(
        store,
        interaction_store,
        audit,
        settings.workspace_root,
        mcp=mcp,
        sandbox=sandbox,
        plugins=plugins,
        tenancy=settings.workspace_tenancy,
        secrets=secrets,
        workspace_trees=settings.workspace_trees,
        readable=readable,
    )
    hook_activities = HookActivities(plugins, tool_activities, audit)
    mcp_activities = McpDiscoveryActivities(mcp, McpToolStore(store.pool), secrets=secrets)
    record_activities = RunRecordActivities(store)
    memory_activities = MemoryActivities(
        store,
        MemoryStore(store.pool),
        llm,
        embedding_model=settings.memory_embedding_model,
        extraction_model=settings.memory_model,
        recall_limit=settings.memory_recall_limit,
        prices=settings.prices,
        anthropic=messages_api,
        plugins=plugins,
        limits=limits,
    )
    interaction_activities = InteractionActivities(interaction_store, audit, GrantStore(store.pool))
    webhook_activities = WebhookActivities(
        webhook_server_secret(settings),
        push_configs=PushConfigStore(store.pool),
        targets=WebhookTargetPolicy(
            targets=settings.webhook_targets, allow_http=settings.webhook_allow_http
        ),
        audit=audit,
        tree=RunTreeStore(store.pool),
    )
    retention_activities = RetentionActivities(RetentionStore(store.pool))
    subagent_activities = SubagentActivities(store, catalog.get)
    coverage_activities = CoverageActivities(
        CoverageStore(store.pool),
        ContextStore(store.pool),
        budget,
        WorkspaceRoots(settings.workspace_root, settings.workspace_tenancy),
        settings.prices,
    )
    router_activities = RouterActivities(
        store,
        llm,
        catalog.all,
        catalog.get,
        sandbox_tool_problem(sandbox.problem),
        messages_api,
        settings.prices,
        plugins,
        limits=limits,
    )
    worker = Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[
            AgentRunWorkflow,
            SessionWorkflow,
            WebhookDeliveryWorkflow,
            CoordinatorWorkflow,
            RetentionWorkflow,
        ],
        activities=[
            a2a_activities.a2a_send,
            a2a_activities.a2a_follow,
            llm_activities.llm_step,
            memory_activities.recall_memories,
            memory_activities.remember_facts,
            compaction_activities.compact_context,
            tool_activities.run_tool,
            tool_activities.run_mcp_tool,
            tool_activities.run_plugin_tool,
            hook_activities.tool_before_hooks,
            hook_activities.tool_after_hooks,
            hook_activities.run_end_hooks,
            mcp_activities.discover_mcp_tools,
            record_activities.start_run,
            record_activities.finish_run,
            interaction_activities.open_interactions,
            interaction_activities.resolve_interaction,
            interaction_activities.session_rules,
            webhook_activities.deliver_webhook,
            webhook_activities.push_targets,
            subagent_activities.open_subagent,
            subagent_activities.record_child_event,
            coverage_activities.list_workspace,
            coverage_activities.note_parts,
            coverage_activities.close_coverage,
            retention_activities.purge_expired_runs,
            *router_activities.registered(),
            AgentAccessActivities(catalog.get, audit).check_agent_roles,
            QuotaActivities(quotas, audit).check_tenant_quota,
        ],
        interceptors=[StoreOutageInterceptor(), *worker_interceptors(settings)],
        # A run whose worker died goes to another after this long, not the default 10 s:
        # a decision sent to it then answers well within the API's wait for the update.
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
        max_concurrent_activities=settings.max_concurrent_activities,
        max_cached_workflows=settings.max_cached_workflows,
        workflow_runner=(
            SandboxedWorkflowRunner() if settings.workflow_sandbox else UnsandboxedWorkflowRunner()
        ),
        deployment_config=deployment_config(settings),
    )
    return WorkerParts(worker=worker, store=store, llm=llm, anthropic=messages_api)


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """The worker's version in its Worker Deployment, when KEEL_WORKER_BUILD_ID names one."""
    if settings.worker_build_id is None:
        return None
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(
            deployment_name=settings.worker_deployment, build_id=settings.worker_build_id
        ),
        use_worker_versioning=True,
        default_versioning_behavior=(
            VersioningBehavior.PINNED
            if settings.worker_versioning == "pinned"
            else VersioningBehavior.AUTO_UPGRADE
        ),
    )


def installed_plugins() -> PluginRegistry:
    """The plugins installed with this worker; each one refused is logged with its reason."""
    plugins = PluginRegistry.installed()
    for entry in plugins.report():
        if entry.status == "refused":
            log.error("plugin %s (%s) refused: %s", entry.entry_point, entry.source, entry.reason)
        else:
            log.info("plugin %s %s loaded from %s", entry.name, entry.version, entry.source)
    return plugins


def bash_sandbox(settings: Settings) -> Sandbox:
    """The sandbox `bash` commands run in; says loudly when commands will not run confined."""
    sandbox = Sandbox.configured(settings.bash_sandbox, hidden=(settings.data_dir,))
    if settings.bash_sandbox == "off":
        log.warning(
            "KEEL_BASH_SANDBOX=off: bash commands run without a sandbox; what they start "
            "can outlive them, write anywhere this user may and reach the network."
        )
    elif sandbox.problem is not None:
        log.error(
            "bwrap is not installed: bash calls will answer with an error. Install the "
            "bubblewrap package, or set KEEL_BASH_SANDBOX=off to run commands unconfined."
        )
    return sandbox


@asynccontextmanager
async def running_worker(settings: Settings) -> AsyncIterator[WorkerParts]:
    """Connect, migrate, and run a worker until the context exits."""
    if settings.temporal_address is None or settings.database_url is None:
        raise RuntimeError("running_worker needs TEMPORAL_ADDRESS and DATABASE_URL resolved.")
    install_tracing(settings, "keel-worker")
    client = await connect(
        settings.temporal_address,
        settings.temporal_namespace,
        plugins=temporal_plugins(settings),
        runtime=worker_runtime(settings),
        data_converter=data_converter(settings),
    )
    cluster = await check_cluster(client)
    if not cluster.ok:
        # Every run it took would fail on the first start of a child or a schedule.
        raise ClusterSetupError(f"The worker did not start: {cluster.sentence()}")
    store = await Store.open(settings.database_url, max_size=settings.database_pool_size)
    try:
        await store.migrate()
        parts = build_worker(client, store, settings)
        task = asyncio.create_task(parts.worker.run())
        log.info("worker polling task queue %s", settings.task_queue)
        try:
            yield parts
        finally:
            await parts.worker.shutdown()
            await asyncio.gather(task, return_exceptions=True)
            await parts.close_clients()
    finally:
        await store.close()


async def run_worker_forever(settings: Settings) -> None:
    async with running_worker(settings):
        await asyncio.Event().wait()
