"""`keel run --local-tools`: the run's read tools execute here, on the user's own files.

The server never sees the directory: each read the model makes opens a
`local_tool_result` interaction, and this client runs the same built-in tool
implementation the worker would, on its own directory, and posts the output as the
answer. Everything else the run asks (approvals, questions) goes to `fallback`.
"""

from __future__ import annotations

import json
from pathlib import Path

from keel.activities.tools.implementations import IMPLEMENTATIONS, ToolContext
from keel.activities.tools.sandbox import Sandbox
from keel.activities.tools.workspace import Workspace
from keel.api.cli.progress import Decider
from keel.api.core.schemas.common import LocalTool
from keel.api.core.schemas.interactions import InteractionDecisionCreate, InteractionPublic
from keel.workflows.interactions.models import MAX_LOCAL_RESULT_CHARS

LOCAL_TOOLS: list[LocalTool] = ["read_file", "list_files", "search_code"]
CUT_NOTE = "\n[output cut: the client sends at most {limit} characters]"


def local_executor(root: Path, fallback: Decider | None) -> Decider:
    """A decider that answers `local_tool_result` interactions by running the tool here."""
    workspace = Workspace(root)
    # Reads never start a process, so no sandbox is needed; `off` keeps it explicit.
    context = ToolContext(workspace=workspace, sandbox=Sandbox.configured("off"))

    def decide(ia: InteractionPublic) -> InteractionDecisionCreate | None:
        if ia.kind != "local_tool_result":
            return fallback(ia) if fallback is not None else None
        implementation = IMPLEMENTATIONS.get(ia.tool)
        if ia.tool not in LOCAL_TOOLS or implementation is None:
            return InteractionDecisionCreate(
                decision="reject", text=f"This client runs only {', '.join(LOCAL_TOOLS)}."
            )
        output = implementation.run(context, json.dumps(ia.arguments)).text or "(no output)"
        if len(output) > MAX_LOCAL_RESULT_CHARS:
            note = CUT_NOTE.format(limit=MAX_LOCAL_RESULT_CHARS)
            output = output[: MAX_LOCAL_RESULT_CHARS - len(note)] + note
        return InteractionDecisionCreate(decision="answer", text=output)

    return decide
