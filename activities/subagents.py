"""Activities of the `task` tool: a sub-agent run opens its record, its parent hears of it.

The worker's agent catalog is handed in as a lookup, so this module needs nothing
of the worker; the child's system prompt and the parent's prompt are stored as the
child's texts, so neither travels in a workflow history.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from temporalio import activity
from temporalio.exceptions import ApplicationError

from keel.activities.store.records import NewRun
from keel.activities.store.run_store import Store
from keel.workflows.activity_refs import Subagents
from keel.workflows.run.agent_spec import AgentSpec
from keel.workflows.run.subagent_models import (
    ChildEventInput,
    OpenSubagentInput,
    SubagentPlan,
    SubagentTask,
)

AgentLookup = Callable[[str], AgentSpec | None]
# Tool results of a step start at this ordinal, in the order of the assistant's calls.
FIRST_TOOL_ORD = 2


class SubagentActivities(Subagents):
    """`open_subagent` and `record_child_event`, idempotent on run ids and event seqs."""

    def __init__(self, store: Store, agents: AgentLookup) -> None:
        self._store = store
        self._agents = agents

    @activity.defn(name="open_subagent")
    async def open_subagent(self, child: OpenSubagentInput) -> SubagentPlan:
        """Record a sub-agent run and its prompt, and answer with its agent.

        The run is recorded even when its agent is unknown, so that its failure (and
        the parent's answer from it) has a record to land in.
        """
        task = child.task
        parent = await self._store.get_run(child.parent_run_id)
        if parent is None or parent.tenant_id != child.tenant_id:
            raise ApplicationError(
                f"Run {child.parent_run_id} is not recorded for tenant {child.tenant_id}, "
                "so its sub-agent cannot start.",
                type="MissingParentRun",
                non_retryable=True,
            )
        if task.part is not None:
            call_id, arguments = f"part-{task.part}", part_call(child.agent, task)
        else:
            call_id, arguments = await self._task_call(child)
        prompt = str(arguments.get("prompt", ""))
        spec = self._agents(child.agent)
        model = (spec.model if spec is not None else None) or parent.model
        # The row first (a retry finds it there); the texts are written on their own key.
        await self._store.create_run(
            NewRun(
                run_id=child.run_id,
                tenant_id=child.tenant_id,
                agent=child.agent,
                model=model,
                requester=child.requester,
                trigger="parent",
                workspace=parent.workspace,
                input=prompt,
                parent_run_id=child.parent_run_id,
            )
        )
        await self._store.put_event(
            child.parent_run_id,
            task.event_seq,
            "tool_call",
            {
                "step": task.step,
                "call_id": call_id,
                "name": "task",
                "arguments": json.dumps(arguments, ensure_ascii=False),
            },
        )
        await self._store.put_event(
            child.parent_run_id,
            task.event_seq + 1,
            "child_run",
            {
                "run_id": child.run_id,
                "agent": child.agent,
                "status": "running",
                "step": task.step,
                "call_id": call_id,
            },
        )
        if spec is None:
            raise ApplicationError(
                f"No agent '{child.agent}' is defined on this worker; define it in "
                "KEEL_AGENTS_DIR of every worker, or remove it from the parent's subagents.",
                type="UnknownAgent",
                non_retryable=True,
            )
        texts_key = await self._store.put_run_texts(child.tenant_id, spec.system_prompt, prompt)
        # The workflow never reads the prompt or description: they stay in Postgres.
        agent = spec.model_copy(update={"system_prompt": "", "description": ""})
        return SubagentPlan(
            agent=agent,
            model=model,
            # A child agent with its own model has its own list; else it keeps its parent's.
            fallback_models=list(spec.fallback_models) if spec.model else None,
            workspace=parent.workspace,
            texts_key=texts_key,
        )

    async def _task_call(self, child: OpenSubagentInput) -> tuple[str, dict[str, object]]:
        """The id and arguments of the parent's `task` call, from the parent's stored message."""
        message = await self._store.get_message(child.parent_run_id, child.task.step, 1)
        calls = (message.tool_calls if message is not None else None) or []
        index = child.task.ord - FIRST_TOOL_ORD
        call = calls[index] if 0 <= index < len(calls) else None
        function = call.get("function") if call is not None else None
        if call is not None and isinstance(function, dict) and function.get("name") == "task":
            parsed = json.loads(str(function.get("arguments") or "{}"))
            return str(call.get("id")), parsed if isinstance(parsed, dict) else {}
        # Written before the parent started this child, so waiting will not bring it.
        raise ApplicationError(
            f"Run {child.parent_run_id} has no task call at step {child.task.step}, "
            f"position {index}; the sub-agent has no prompt.",
            type="MissingTaskCall",
            non_retryable=True,
        )

    @activity.defn(name="record_child_event")
    async def record_child_event(self, event: ChildEventInput) -> None:
        child = event.child
        await self._store.put_event(
            event.run_id,
            event.event_seq,
            "child_run",
            {
                "run_id": child.run_id,
                "agent": child.agent,
                "status": child.status,
                "step": child.step,
                "pending_interactions": child.pending,
            },
        )


def part_call(agent: str, task: SubagentTask) -> dict[str, object]:
    """The `task` call Keel makes for a part of a coverage plan: its agent and prompt."""
    files = "\n".join(f"- {path}" for path in task.files)
    prompt = (
        f"Review part {task.part} of this workspace ({len(task.files)} files), planned by "
        "Keel so that every file is read. Read every line of each file below: when an "
        "output is cut, call read_file again with the start_line it names. Report each "
        "finding as `- path:line: problem`, then `## Files read` and `## Not read` (with "
        "the reason for each), and end with the findings for machines: a fenced block "
        "tagged `findings` holding a JSON array, one object per finding with `file`, "
        "`line`, `severity` (high, medium or low), `title` and `detail` (`[]` when there "
        f"are none).\n## Files to read\n{files}"
    )
    return {"agent": agent, "prompt": prompt}
