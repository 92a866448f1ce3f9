"""What a `local_tool_result` interaction takes: the output from the client that runs it.

A client-executed call is no proposal a person approves: the client that started the
run executes it on its own files and answers with the output. An `approve` of one
(from the console, say) is refused here, before it reaches the run, so the caller hears
why at once even when no worker is running (the run would refuse a queued one later).
"""

from __future__ import annotations

from keel.workflows.interactions.models import DecisionKind, Interaction


def local_result_refusal(
    interaction: Interaction, decision: DecisionKind, shown_id: str
) -> str | None:
    """Why `decision` cannot take on `interaction`, if it is a client-executed call.

    `shown_id` is the interaction's id as the caller sees it."""
    if interaction.kind != "local_tool_result" or decision in ("answer", "reject"):
        return None
    return (
        f"Interaction {shown_id} is a {interaction.tool} call that the client which "
        "started the run executes on its own files (a client-executed call, "
        "local_tool_result); it cannot be approved. That client answers it with the "
        "tool's output (decision `answer`, e.g. `keel run --local-tools`), or `reject`s it."
    )
