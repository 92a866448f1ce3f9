"""`report_finding`: the model records a finding as it makes it, for the findings ledger.

The arguments are validated by the gate (the schema of a finding); here the file must be
one of the workspace's, so a finding cites a place that exists. The finding travels back
on the `ToolOutput`, and the tool activity records it in the ledger keyed by the call.
"""

from __future__ import annotations

from keel.activities.tools.file_tools import ToolOutput
from keel.activities.tools.workspace import PathEscapeError, Workspace
from keel.workflows.gate.tool_specs import ReportFindingArgs
from keel.workflows.run.findings import Finding

__all__ = ["report_finding"]


def report_finding(ws: Workspace, args: ReportFindingArgs) -> ToolOutput:
    """The finding, checked to cite a file of the workspace, ready to record."""
    try:
        path = ws.resolve(args.file)
    except PathEscapeError as exc:
        return ToolOutput(f"Error: {exc}", is_error=True)
    if not path.is_file():
        return ToolOutput(
            f"Error: '{args.file}' is not a file of the workspace; cite the path read_file "
            "showed (relative to the workspace root) and call report_finding again.",
            is_error=True,
        )
    rel = ws.relative(path)
    finding = Finding(**args.model_dump(exclude={"file"}), file=rel)
    place = f"{rel}:{args.line}" if args.line is not None else rel
    return ToolOutput(
        f"Recorded: {args.severity} {place} — {args.title}. Keel puts it in the final "
        "report; you need not repeat it.",
        findings=(finding,),
    )
