"""LangGraph's time travel on Keel, with the real `langgraph-sdk` client: a thread's history
lists a checkpoint per step of its runs, and a run created at a checkpoint forks there."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from keel.worker.scripted.llm import Script, Turn
from tests.integration.keel_http import LaunchKeel, StartLLM
from tests.integration.test_forks import HINT, six_steps
from tests.integration.test_langgraph import langgraph, text_of

TASK = {"role": "user", "content": "Why does add fail?"}


def checkpoint_of(state: dict[str, Any]) -> str:
    return str(state["checkpoint"]["checkpoint_id"])


def parent_of(state: dict[str, Any]) -> str | None:
    parent = state["parent_checkpoint"]
    return None if parent is None else str(parent["checkpoint_id"])


async def test_history_lists_a_checkpoint_per_step_and_a_run_there_forks(
    scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    # One turn more than the run needs: a fork at its last step asks for a seventh.
    llm = scripted(Script(turns=[*six_steps().turns, Turn(content="A second answer.")]))
    async with keel_app(llm) as http:
        lg = langgraph(http)
        thread_id = (await lg.threads.create(metadata={"graph_id": "investigate"}))["thread_id"]
        await lg.runs.wait(thread_id, "investigate", input={"messages": [TASK]})
        (original,) = await lg.runs.list(thread_id)
        run = original["run_id"]
        fourth = llm.last_request(3)

        history = await lg.threads.get_history(thread_id, limit=20)
        assert [checkpoint_of(s) for s in history] == [f"{run}@{n}" for n in range(6, 0, -1)]
        assert [parent_of(s) for s in history] == [*(f"{run}@{n}" for n in range(5, 0, -1)), None]
        at_three = history[3]
        kinds = [m["type"] for m in at_three["values"]["messages"]]
        assert kinds == ["human", "ai", "tool", "ai", "tool", "tool", "ai", "tool"], kinds
        assert at_three["values"]["messages"][6]["tool_calls"][0]["args"] == {"path": "README.md"}

        llm.reset()
        values = await lg.runs.wait(
            thread_id,
            "investigate",
            input={"messages": [{"role": "user", "content": HINT}]},
            checkpoint_id=checkpoint_of(at_three),
        )
        assert text_of(values)[-1][0] == "ai", values
        # The fork's first request: the original's first three steps, then the message.
        first = llm.last_request(3)
        assert first["messages"] == [*fourth["messages"], {"role": "user", "content": HINT}]
        assert llm.requests_by_turn[0] == 0

        runs = await lg.runs.list(thread_id)
        assert len(runs) == 2 and runs[1]["run_id"] == run, runs
        fork = runs[0]["run_id"]
        rest = http.get(f"/v1/runs/{fork}")
        shown = (await rest).json()
        assert (shown["forked_from"], shown["forked_at_step"]) == (run, 3), shown
        history = await lg.threads.get_history(thread_id, limit=20)
        # The fork's three steps, the first with the checkpoint it left from as parent.
        assert [checkpoint_of(s) for s in history[:3]] == [f"{fork}@{n}" for n in (3, 2, 1)]
        assert parent_of(history[2]) == f"{run}@3"
        assert len(history) == 9
        # The original's checkpoints are as they were.
        assert [checkpoint_of(s) for s in history[3:]] == [f"{run}@{n}" for n in range(6, 0, -1)]

        # The checkpoint object the SDK's types carry works too, and a bare run id
        # names its last step.
        llm.reset()
        await lg.runs.wait(
            thread_id,
            "investigate",
            input={"messages": [{"role": "user", "content": "And once more?"}]},
            checkpoint={"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": run},
        )
        newest = (await lg.runs.list(thread_id))[0]["run_id"]
        assert (await http.get(f"/v1/runs/{newest}")).json()["forked_at_step"] == 6

        # A malformed checkpoint is a 422, another thread's run a 404, another tenant's a 404.
        with pytest.raises(UnprocessableEntityError):
            await lg.runs.create(thread_id, "investigate", checkpoint_id=f"{run}@x")
        other = (await lg.threads.create(metadata={"graph_id": "investigate"}))["thread_id"]
        with pytest.raises(NotFoundError):
            await lg.runs.create(other, "investigate", checkpoint_id=f"{run}@3")
        mallory = langgraph(http, "mallory", "other-tenant")
        with pytest.raises(NotFoundError):
            await mallory.threads.get_history(thread_id)
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await mallory.runs.wait(thread_id, "investigate", checkpoint_id=f"{run}@3")
        assert refused.value.response.status_code == 404
