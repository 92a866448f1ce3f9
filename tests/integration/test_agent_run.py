"""AgentRunWorkflow on the real dev server, Postgres and the scripted LLM over HTTP."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError

from keel.activities.store.records import NewRun
from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.workflows.run.agent_run import AgentRunWorkflow
from keel.workflows.run.models import RunInput
from tests.conftest import in_process_worker
from tests.integration.runs import agent, start_run

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]


def call(name: str, arguments: dict[str, object] | str) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=arguments)


async def tool_messages(store: Store, run_id: str) -> list[str]:
    messages = await store.conversation(run_id, None)
    return [m.content or "" for m in messages if m.role == "tool"]


async def test_review_run_reads_files_and_reports_them(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[call("list_files", {"pattern": "**/*.py"})]),
                Turn(
                    tool_calls=[
                        call("read_file", {"path": "pkg/core.py"}),
                        call("search_code", {"pattern": "TODO"}),
                    ]
                ),
                Turn(content="## Files reviewed\n{files_read}\n\nLooks fine."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        result = await handle.result()

    assert result.status == "completed"
    assert result.stop_reason == "final_answer"
    assert result.steps == 3 and result.tool_calls == 3
    assert result.usage.prompt_tokens == 300

    run = await store.get_run(handle.id)
    assert run is not None and run.status == "completed"
    assert run.report is not None and "- pkg/core.py" in run.report

    tools = await tool_messages(store, handle.id)
    assert "pkg/core.py" in tools[0]  # list_files
    assert "return a + b" in tools[1]  # read_file
    assert "TODO: handle None" in tools[2]  # search_code

    events = await store.list_events(handle.id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert types[0] == "run_started" and types[-1] == "done"
    assert types.count("tool_call") == 3 and types.count("tool_result") == 3
    assert types.count("message") == 3 and types.count("usage") == 3
    # The model saw the tool results of the step before it.
    second_request = llm.last_request(2)
    assert [m["role"] for m in second_request["messages"]][-3:] == ["assistant", "tool", "tool"]


async def test_invalid_arguments_and_unknown_tools_go_back_to_the_model(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        call("read_file", '{"path": "pkg/core.py"'),
                        call("read_file", {"paht": "pkg/core.py"}),
                        call("delete_everything", {}),
                        call("read_file", {"path": "pkg/core.py", "start_line": 0}),
                    ]
                ),
                Turn(tool_calls=[call("read_file", {"path": "pkg/core.py"})]),
                Turn(content="Done after correcting my calls."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        result = await handle.result()

    assert result.status == "completed" and result.stop_reason == "final_answer"
    tools = await tool_messages(store, handle.id)
    assert "not valid JSON" in tools[0]
    assert "paht" in tools[1] and "Extra inputs are not permitted" in tools[1]
    assert "unknown tool 'delete_everything'" in tools[2]
    assert "start_line" in tools[3]
    assert all(t.startswith("Error:") for t in tools[:4])
    assert "return a + b" in tools[4]
    # The errors reached the model with the next request.
    request = llm.last_request(1)
    sent = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    assert len(sent) == 4 and all(s.startswith("Error:") for s in sent)


async def test_path_escapes_are_refused(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    tmp_path: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    os.symlink(secret, workspace / "link.txt")
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        call("read_file", {"path": "../secret.txt"}),
                        call("read_file", {"path": str(secret)}),
                        call("read_file", {"path": "link.txt"}),
                        call("search_code", {"pattern": "SECRET", "path": ".."}),
                    ]
                ),
                Turn(content="Could not read outside the workspace."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        result = await handle.result()

    assert result.status == "completed"
    tools = await tool_messages(store, handle.id)
    assert len(tools) == 4
    for text in tools:
        assert text.startswith("Error:") and "outside the workspace" in text
        assert "TOP SECRET" not in text


async def test_a_repeated_call_gets_the_earlier_answer(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[call("read_file", {"path": "pkg/core.py"})]),
                Turn(tool_calls=[call("read_file", {"start_line": 1, "path": "pkg/core.py"})]),
                Turn(content="Same file twice."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        await handle.result()
    tools = await tool_messages(store, handle.id)
    assert tools[0] == tools[1]
    results = [e for e in await store.list_events(handle.id) if e.type == "tool_result"]
    assert results[1].data["cached"] is True


async def test_max_steps_forces_a_final_answer(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    turns = [
        Turn(
            content=f"Looking at line {i}.",
            tool_calls=[call("read_file", {"path": "pkg/core.py", "start_line": i})],
        )
        for i in range(1, 6)
    ]
    llm = scripted(Script(turns=turns))
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace, spec=agent(max_steps=3))
        result = await handle.result()

    assert result.stop_reason == "max_steps" and result.status == "completed"
    assert result.steps == 3 and result.tool_calls == 2
    last = llm.last_request(2)
    assert last["tool_choice"] == "none"
    assert "limit of this run (max_steps)" in last["messages"][-1]["content"]
    run = await store.get_run(handle.id)
    assert run is not None and run.report == "Looking at line 3."


# The store says whether an output repeats an earlier one: the workflow keeps no hashes.
async def test_no_progress_nudges_then_forces_an_answer(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    same = [call("read_file", {"path": "README.md"})]
    llm = scripted(Script(turns=[Turn(tool_calls=same)] * 6 + [Turn(content="final")]))
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(
            temporal_client, settings, workspace, spec=agent(max_stale_rounds=2)
        )
        result = await handle.result()

    # Round 1 is new; rounds 2-3 are stale (nudge), round 4 stale again (forced).
    assert result.stop_reason == "no_progress"
    assert result.steps == 5
    assert llm.last_request(3)["tool_choice"] == "auto"
    assert "found nothing new" in llm.last_request(3)["messages"][-1]["content"]
    assert llm.last_request(4)["tool_choice"] == "none"


async def test_consecutive_failures_force_an_answer(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    turns = [Turn(tool_calls=[call("read_file", {"path": f"missing{i}.py"})]) for i in range(5)]
    llm = scripted(Script(turns=[*turns, Turn(content="Nothing to read.")]))
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(
            temporal_client, settings, workspace, spec=agent(max_consecutive_failures=3)
        )
        result = await handle.result()
    assert result.stop_reason == "max_consecutive_failures"
    assert result.tool_calls == 3


async def test_unreachable_llm_is_retried_then_fails_the_run(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    settings_for: MakeSettings,
) -> None:
    from keel.worker.dev_stack import free_port

    settings = settings_for(f"http://127.0.0.1:{free_port()}/v1", workspace, llm_max_attempts=2)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    assert "unreachable" in str(failure.value.cause)
    run = await store.get_run(handle.id)
    assert run is not None and run.status == "failed" and run.stop_reason == "error"
    assert run.error is not None and "LLM endpoint unreachable" in run.error
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) == 2
    events = await store.list_events(handle.id)
    assert events[-1].type == "error"


async def test_a_rejected_request_fails_fast(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    # The script is exhausted after one tool turn: the server answers 400.
    llm = scripted(Script(turns=[Turn(tool_calls=[call("list_files", {})])]))
    settings = settings_for(llm, workspace, llm_max_attempts=5)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    assert llm.requests_by_turn[1] == 1  # not retried
    run = await store.get_run(handle.id)
    assert run is not None and run.error is not None and "rejected the request (400)" in run.error


async def test_secrets_in_tool_output_are_masked_in_events(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    key = "sk-proj-" + "a1B2c3D4" * 6
    (workspace / ".env").write_text(f"OPENAI_API_KEY={key}\npassword=hunter2hunter2\n")
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[call("read_file", {"path": ".env"})]),
                Turn(content=f"I found the key {key} in .env."),
            ]
        )
    )
    settings = settings_for(llm, workspace)
    async with in_process_worker(temporal_client, store, settings):
        handle = await start_run(temporal_client, settings, workspace)
        await handle.result()
    events = await store.list_events(handle.id)
    assert key not in str([e.data for e in events])
    assert any("[redacted]" in str(e.data) for e in events if e.type == "message")


async def test_a_run_whose_stored_texts_are_missing_fails_clearly(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    llm = scripted(Script(turns=[Turn(content="never asked")]))
    settings = settings_for(llm, workspace)
    # Stored for another tenant: a key alone never reaches across tenants.
    key = await store.put_run_texts("other-tenant", "Be brief.", "Review it.")
    spec = agent()
    run = RunInput(
        run_id="run-test-no-texts",
        agent=spec.model_copy(update={"system_prompt": ""}),
        input="",
        texts_key=key,
        model=settings.model,
        workspace=str(workspace),
    )
    # Recorded as queued first, as the API does.
    await store.create_run(
        NewRun(
            run_id=run.run_id,
            tenant_id=run.tenant_id,
            agent=spec.name,
            model=run.model,
            requester=run.requester,
            trigger=run.trigger,
            workspace=run.workspace,
            input="Review it.",
        )
    )
    async with in_process_worker(temporal_client, store, settings):
        handle = await temporal_client.start_workflow(
            AgentRunWorkflow.run, run, id=run.run_id, task_queue=settings.task_queue
        )
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    assert llm.total_requests == 0
    record = await store.get_run(run.run_id)
    assert record is not None and record.status == "failed"
    assert record.error is not None and "no stored prompt and input" in record.error


async def test_stored_texts_are_kept_once_per_tenant(store: Store) -> None:
    first = await store.put_run_texts("acme", "Be brief.", "Review it.")
    again = await store.put_run_texts("acme", "Be brief.", "Review it.")
    other = await store.put_run_texts("acme", "Be brief.", "Review that.")
    assert first == again != other and len(first) == 64
    assert await store.run_texts("acme", first) == ("Be brief.", "Review it.")
    assert await store.run_texts("globex", first) is None


async def test_a_model_is_fast_once_its_latest_calls_all_were(store: Store) -> None:
    model = "model-fast-check"
    await store.create_run(
        NewRun(
            run_id="run-test-fast",
            tenant_id="default",
            agent="review",
            model=model,
            requester="user:alice",
            trigger="api",
            workspace="/tmp",
            input="hi",
        )
    )

    async def called(step: int, latency_ms: int) -> None:
        async with store.pool.connection() as conn:
            await conn.execute(
                "INSERT INTO llm_calls (run_id, step, model, prompt_tokens, completion_tokens,"
                " latency_ms, attempt, created_at)"
                " VALUES (%s, %s, %s, 1, 1, %s, 1, now() + %s * interval '1 ms')",
                ("run-test-fast", step, model, latency_ms, step),
            )

    assert not await store.model_is_fast(model, 1000)  # never called: unknown
    for step in (1, 2):
        await called(step, 50)
    assert not await store.model_is_fast(model, 1000)  # too few calls to tell
    await called(3, 2500)
    await called(4, 50)
    assert not await store.model_is_fast(model, 1000)  # one of the latest was slow
    for step in range(5, 16):
        await called(step, 40)
    assert await store.model_is_fast(model, 1000)  # the slow one is no longer latest
