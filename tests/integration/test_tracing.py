"""Traces over OTLP: the GenAI spans of a run, under the API request that started it."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from temporalio.client import Client
from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider

from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import TemporalDevServer, free_port
from keel.worker.observability.tracing import install_tracing, temporal_plugins
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.worker.temporal_client import connect
from keel.workflows.run.agent_run import AgentRunWorkflow
from tests.conftest import in_process_worker
from tests.integration.keel_http import keel_api
from tests.integration.otlp_receiver import OtlpReceiver
from tests.integration.runs import agent, start_run
from tests.integration.test_approvals import decide, finished, pending, start, write
from tests.plugin_dists import EXAMPLE_PLUGIN, install_project, on_path

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    # One per test process: the tracer provider is process-wide, its endpoint fixed.
    receiver = OtlpReceiver()
    receiver.start()
    yield receiver
    # Left listening: the process-wide provider exports to it until the process ends,
    # and a refused export would log an error into later tests.
    flush()


def flush() -> None:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, ReplaySafeTracerProvider)
    assert provider.force_flush(10_000)


async def test_a_run_exports_its_genai_spans_once_under_the_request(
    temporal_server: TemporalDevServer,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
    receiver: OtlpReceiver,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"}),
                        write("notes.txt", "reviewed"),
                    ]
                ),
                Turn(content="Done."),
            ]
        )
    )
    settings = settings_for(
        llm, workspace, api_port=free_port(), otel_exporter_otlp_endpoint=receiver.url
    )
    install_tracing(settings, "keel-test")
    client: Client = await connect(temporal_server.address, plugins=temporal_plugins(settings))
    # The API alone, traced through this test's client; two workers in turn take the run.
    async with keel_api(client, store, settings, headers={}, worker=False) as http:
        async with in_process_worker(client, store, settings):
            run_id = await start(http, workspace)
            [ia] = await pending(http, run_id)
        # A new worker takes the run over: it replays the history so far, then goes on.
        async with in_process_worker(client, store, settings):
            assert (await decide(http, run_id, ia)).status_code == 200
            run = await finished(http, run_id)
        assert run["status"] == "completed"
        flush()

        [agent_span] = [s for s in receiver.spans if s.name == "invoke_agent build"]
        spans = receiver.in_trace(agent_span.trace_id)
        assert Counter(s.name for s in spans) == Counter(
            {
                "POST /v1/runs": 1,
                "invoke_agent build": 1,
                "chat scripted": 2,
                "execute_tool read_file": 1,
                "execute_tool write_file": 1,
            }
        )
        [request] = [s for s in spans if s.name == "POST /v1/runs"]
        assert request.parent_span_id == "" and request.service == "keel-test"
        assert agent_span.parent_span_id == request.span_id
        for span in spans:
            if span is not request and span is not agent_span:
                assert span.parent_span_id == agent_span.span_id, span.name

        assert agent_span.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert agent_span.attributes["gen_ai.agent.name"] == "build"
        assert agent_span.attributes["gen_ai.conversation.id"] == run_id
        first, second = sorted(
            (s for s in spans if s.name == "chat scripted"),
            key=lambda s: int(s.attributes["keel.step"]),
        )
        assert first.attributes == {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "scripted",
            "gen_ai.response.model": "scripted",
            "gen_ai.response.finish_reasons": ["tool_calls"],
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 20,
            "gen_ai.conversation.id": run_id,
            "keel.run.id": run_id,
            "keel.step": 1,
        }
        assert second.attributes["gen_ai.response.finish_reasons"] == ["stop"]
        # No message contents unless asked for.
        assert not any("gen_ai.input.messages" in s.attributes for s in spans)
        [tool] = [s for s in spans if s.name == "execute_tool read_file"]
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool.attributes["gen_ai.tool.name"] == "read_file"
        assert tool.attributes["gen_ai.tool.call.id"]

        # A third worker replays the whole finished run to answer a query: no span again.
        before = len(receiver.spans)
        async with in_process_worker(client, store, settings):
            handle = client.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
            progress = await handle.query(AgentRunWorkflow.progress)
            assert progress.status == "completed"
        await asyncio.sleep(0.2)
        flush()
        assert len(receiver.in_trace(agent_span.trace_id)) == len(spans)
        assert [s.name for s in receiver.spans[before:] if not s.name.startswith("GET ")] == []


async def test_a_provider_plugin_s_model_calls_are_traced_as_a_built_in_s(
    temporal_server: TemporalDevServer,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    settings_for: MakeSettings,
    receiver: OtlpReceiver,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    modules = install_project(EXAMPLE_PLUGIN, site)
    settings = settings_for(
        "http://127.0.0.1:9/v1",  # nothing listens: every call is the plugin's
        workspace,
        model="example/counter",
        otel_exporter_otlp_endpoint=receiver.url,
    )
    install_tracing(settings, "keel-test")
    client: Client = await connect(temporal_server.address, plugins=temporal_plugins(settings))
    with on_path(site, modules):
        async with in_process_worker(client, store, settings):
            handle = await start_run(
                client, settings, workspace, spec=agent("notes"), prompt="Count README.md."
            )
            result = await handle.result()
    assert result.status == "completed"
    flush()

    [agent_span] = [
        s
        for s in receiver.spans
        if s.name == "invoke_agent notes" and s.attributes["gen_ai.conversation.id"] == handle.id
    ]
    spans = receiver.in_trace(agent_span.trace_id)
    chats = sorted(
        (s for s in spans if s.name == "chat example/counter"),
        key=lambda s: int(s.attributes["keel.step"]),
    )
    assert [s.attributes["gen_ai.response.finish_reasons"] for s in chats] == [
        ["tool_calls"],
        ["stop"],
    ]
    for chat in chats:
        assert chat.parent_span_id == agent_span.span_id
        assert chat.attributes["gen_ai.provider.name"] == "counter"
        assert chat.attributes["keel.plugin"] == "example"
        assert chat.attributes["gen_ai.request.model"] == "example/counter"
        assert chat.attributes["gen_ai.response.model"] == "example/counter"
    assert sum(int(s.attributes["gen_ai.usage.input_tokens"]) for s in chats) == (
        result.usage.prompt_tokens
    )
    assert sum(int(s.attributes["gen_ai.usage.output_tokens"]) for s in chats) == (
        result.usage.completion_tokens
    )
    assert [s.name for s in spans if s.name.startswith("execute_tool")] == [
        "execute_tool word_count"
    ]
