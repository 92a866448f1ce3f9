"""Approve and reject racing for one interaction: exactly one wins, and every record agrees.

Ten approvals and ten rejections go at once over HTTP to one pending `bash` call, for
several rounds. Each round counts contradictions between the answers the requests got,
the stored interaction, the events, the audit log, whether the command ran and what the
model was told. Zero is the bar.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from tests.integration.keel_http import LaunchKeel
from tests.integration.test_approvals import ALICE, decide, finished, pending, start

StartLLM = Callable[[Script], ScriptedLLMServer]
MakeSettings = Callable[..., Settings]
ROUNDS = 12
EACH = 10


async def one_round(
    http: httpx.AsyncClient, store: Store, workspace: Path, round_: int
) -> list[str]:
    """Race one interaction; the contradictions found, as sentences."""
    # Each round in a workspace of its own, where the command appends to `ran.txt`.
    root = workspace / f"round-{round_}"
    root.mkdir()
    marker = root / "ran.txt"
    run_id = await start(http, root)
    [ia] = await pending(http, run_id)
    decisions = ["approve", "reject"] * EACH
    answers = await asyncio.gather(*(decide(http, run_id, ia, d) for d in decisions))
    winners = [d for d, a in zip(decisions, answers, strict=True) if a.status_code == 200]
    problems: list[str] = []
    odd = [(a.status_code, a.text) for a in answers if a.status_code not in (200, 409)]
    if odd:
        problems.append(f"answers other than 200/409: {odd}")
    # The same decision sent again is the same decision (the service answers it
    # `accepted` once it took), so every 200 must be for one decision, and every
    # request for the other must be refused.
    if len(set(winners)) != 1:
        return [*problems, f"requests were told {sorted(set(winners))} took"]
    winner = winners[0]
    expected = "approved" if winner == "approve" else "rejected"
    # A 200 shows the interaction as it is when answered: an approval may already have
    # run its command by then, which agrees with it; anything else contradicts it.
    agreeing = {"approve": {"approved", "executing", "executed"}, "reject": {"rejected"}}[winner]
    for answer in answers:
        shown = answer.json()["interaction"]["status"] if answer.status_code == 200 else None
        if shown is not None and shown not in agreeing:
            problems.append(f"a 200 for {winner} says {shown}")
    for answer in answers:
        if answer.status_code == 409 and "already" not in answer.text:
            problems.append(f"a 409 that does not say why: {answer.text}")
    run = await finished(http, run_id)
    if run["status"] != "completed":
        problems.append(f"run {run['status']}: {run.get('error')}")

    [stored] = (await http.get(f"/v1/runs/{run_id}/interactions", headers=ALICE)).json()
    final = {"approve": ("executed",), "reject": ("rejected",)}[winner]
    if stored["status"] not in final or stored["decision"] != winner:
        problems.append(f"{winner} won; the store says {stored['status']}/{stored['decision']}")

    events = (await http.get(f"/v1/runs/{run_id}/events", headers=ALICE)).json()["events"]
    resolved = [e["data"] for e in events if e["type"] == "interaction_resolved"]
    if [e["decision"] for e in resolved] != [winner]:
        problems.append(f"{winner} won; resolved events say {[e['decision'] for e in resolved]}")

    actions = [
        e.action
        for e in await AuditLog(store.pool).entries("default", limit=10_000)
        if e.subject == f"{run_id}/{ia['id']}" and e.action.startswith("interaction.")
    ]
    decided = [a for a in actions if a in ("interaction.approved", "interaction.rejected")]
    if decided != [f"interaction.{expected}"]:
        problems.append(f"{winner} won; the audit log says {decided}")

    ran = marker.exists() and marker.read_text()
    if (winner == "approve") != bool(ran) or (ran and ran != "x"):
        problems.append(f"{winner} won; the command's marker holds {ran!r}")

    told = [m.content or "" for m in await store.conversation(run_id, None) if m.role == "tool"]
    said_rejected = len(told) == 1 and "rejected" in told[0]
    said_ran = len(told) == 1 and "exit code 0" in told[0]
    if (winner == "approve" and not said_ran) or (winner == "reject" and not said_rejected):
        problems.append(f"{winner} won; the model was told {told}")
    return [f"round {round_} ({run_id}): {p}" for p in problems]


@pytest.mark.scale
async def test_approve_and_reject_racing_leave_one_consistent_outcome(
    store: Store, workspace: Path, scripted: StartLLM, keel_app: LaunchKeel
) -> None:
    append = [sys.executable, "-c", "open('ran.txt', 'a').write('x')"]
    llm = scripted(
        Script(
            turns=[
                Turn(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": append})]),
                Turn(content="{tool_results} result."),
            ]
        )
    )
    contradictions: list[str] = []
    winners: list[str] = []
    async with keel_app(llm, headers={}, http_timeout=60) as http:
        for round_ in range(ROUNDS):
            found = await one_round(http, store, workspace, round_)
            contradictions.extend(found)
            ran = (workspace / f"round-{round_}" / "ran.txt").exists()
            winners.append("approve" if ran else "reject")
    print(f"winners: {winners}")
    assert contradictions == [], "\n".join(contradictions)


async def test_the_same_approval_sent_again_while_the_first_is_stored_hears_it_took(
    workspace: Path, scripted: StartLLM, keel_app: Any
) -> None:
    """Found by the scale-out drill: a client that sends its approval again because the
    first request's connection broke (its API replica died) reached the run while the
    first was still being stored, and heard 409 "already being decided by another
    request" — about its own decision, which took. The same decision from the same person
    waits for the stored outcome and hears that it took."""
    append = [sys.executable, "-c", "open('ran.txt', 'a').write('x')"]
    script = Script(
        turns=[
            Turn(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": append})]),
            Turn(content="Done."),
        ]
    )
    async with keel_app(scripted(script), headers=ALICE) as http:
        run_id = await start(http, workspace)
        [ia] = await pending(http, run_id)
        answers = await asyncio.gather(*(decide(http, run_id, ia) for _ in range(EACH)))
        codes = [(a.status_code, a.json().get("status")) for a in answers]
        assert all(code in (200, 202) for code, _ in codes), [a.text for a in answers]
        run = await finished(http, run_id)
    assert run["status"] == "completed"
    assert (workspace / "ran.txt").read_text() == "x"
