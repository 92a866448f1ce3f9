"""The coordinator delegates over A2A to Keel's own agents and merges their reports."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment

from keel.activities.a2a.client import A2AClientActivities
from keel.activities.store.audit import AuditLog
from keel.activities.store.run_store import Store
from keel.worker.dev_stack import free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, ScriptedToolCall, Turn
from keel.workflows.coordinator.models import CoordinatorInput, DelegateInput, RemoteAgent
from keel.workflows.coordinator.workflow import CoordinatorWorkflow
from keel.workflows.run.findings import findings_schema
from tests.conftest import auth_headers
from tests.integration.keel_http import LaunchKeel, base_url, settings_of
from tests.unit.test_a2a_client_targets import agent as fake_agent


async def test_two_agents_merged_and_an_unreachable_one_marked(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"})
                    ]
                ),
                Turn(content="Findings from {files_read}"),
            ]
        )
    )
    dead = f"http://127.0.0.1:{free_port()}"
    async with keel_app(llm) as http:
        url, settings = base_url(http), settings_of(http)
        request = CoordinatorInput(
            task="Review pkg/core.py",
            agents=[
                RemoteAgent(url=f"{url}/a2a/review", name="Reviewer"),
                RemoteAgent(url=f"{url}/a2a/investigate"),
                RemoteAgent(url=dead, name="Offline"),
            ],
            tenant_id="default",
            requester="user:alice",
            timeout_s=120,
        )
        result = await temporal_client.execute_workflow(
            CoordinatorWorkflow.run,
            request,
            id=f"coord-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
        )
    statuses = {o.agent_name: o.status for o in result.outcomes}
    assert statuses == {
        "Reviewer": "completed",
        "Keel investigate": "completed",
        "Offline": "unreachable",
    }
    report = result.report
    assert "2 of 3 agents answered" in report
    assert report.count("Findings from - pkg/core.py") == 2
    assert "## Offline — unreachable" in report and "This section is missing" in report
    runs = await store.list_runs(tenant_id="default", limit=50)
    delegated = [r for r in runs if r.trigger == "a2a" and r.requester == "user:alice"]
    assert {r.agent for r in delegated} >= {"review", "investigate"}


FINDINGS = [
    {
        "file": "pkg/core.py",
        "line": 2,
        "severity": "medium",
        "title": "None is not handled",
        "detail": "add(None, 1) raises TypeError; check the arguments.",
    },
    {"file": "README.md", "line": None, "severity": "low", "title": "The README is one line"},
]


async def test_findings_are_kept_sent_as_data_and_merged_across_agents(
    temporal_client: Client,
    workspace: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
    keel_app: LaunchKeel,
) -> None:
    report = "## Findings\n- medium pkg/core.py:2\n\n```findings\n" + json.dumps(FINDINGS) + "\n```"
    llm = scripted(
        Script(
            turns=[
                Turn(
                    tool_calls=[
                        ScriptedToolCall(name="read_file", arguments={"path": "pkg/core.py"})
                    ]
                ),
                Turn(content=report),
            ]
        )
    )
    async with keel_app(llm, headers=auth_headers("default", "alice")) as http:
        url = base_url(http)
        result = await temporal_client.execute_workflow(
            CoordinatorWorkflow.run,
            CoordinatorInput(
                task="Review pkg/core.py",
                agents=[
                    RemoteAgent(url=f"{url}/a2a/review", name="Reviewer"),
                    RemoteAgent(url=f"{url}/a2a/investigate", name="Investigator"),
                ],
                requester="user:alice",
                timeout_s=120,
            ),
            id=f"coord-{uuid.uuid4().hex[:8]}",
            task_queue=settings_of(http).task_queue,
        )
        # Each run keeps its findings, checked against the published schema.
        for outcome in result.outcomes:
            assert outcome.status == "completed" and outcome.task_id
            run = (await http.get(f"/v1/runs/{outcome.task_id}")).json()
            # Keel adds whether the tree read the place, and who reported it.
            assert [(f["verified"], f["reported_by"]) for f in run["findings"]] == [
                (True, [run["agent"]]),
                (False, [run["agent"]]),  # README.md was never read
            ]
            kept = [
                {k: v for k, v in f.items() if k not in ("verified", "reported_by")}
                for f in run["findings"]
            ]
            jsonschema.validate(kept, findings_schema())
            assert kept == [{"detail": "", **f} for f in FINDINGS]
            assert run["findings_error"] is None
            # ...and the A2A task carries them as a data part of its report artifact.
            got = await http.post(
                "/a2a",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "GetTask",
                    "params": {"id": outcome.task_id},
                },
                headers={"A2A-Version": "1.0"},
            )
            [artifact] = got.json()["result"]["artifacts"]
            text, data, file = artifact["parts"]
            assert text["mediaType"] == "text/markdown" and "```findings" in text["text"]
            assert data["mediaType"] == "application/json"
            assert data["data"]["findings"] == kept
            # ...beside the report as a file (the v1.0 JSON binding sends bytes as base64).
            assert (file["filename"], file["mediaType"]) == ("report.md", "text/markdown")
            assert base64.b64decode(file["raw"]).decode("utf-8") == text["text"]
            assert outcome.findings is not None and len(outcome.findings) == 2

    # Merged by place, not by prose: each finding once, naming both agents.
    merged = [(f.file, f.line, f.severity, f.reported_by) for f in result.findings]
    assert merged == [
        ("pkg/core.py", 2, "medium", ["Reviewer", "Investigator"]),
        ("README.md", None, "low", ["Reviewer", "Investigator"]),
    ]
    section = result.report.split("## Findings\n", 1)[1].split("\n## ", 1)[0]
    assert section.count("None is not handled") == 1
    assert "**medium** `pkg/core.py:2` — None is not handled (Reviewer, Investigator)" in section


async def test_the_coordinations_route_is_idempotent_tenant_scoped_and_audited(
    store: Store,
    workspace: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(Script(turns=[Turn(content="No retry logic in pkg/core.py.")]))
    # Keel's own agents are reached whatever the webhook target policy.
    chosen = f"coord-{uuid.uuid4().hex[:8]}"
    async with (
        keel_app(
            llm, http_timeout=30, headers=auth_headers("default", "alice"), webhook_targets="public"
        ) as alice,
        httpx.AsyncClient(
            base_url=base_url(alice), headers=auth_headers("other-tenant", "mallory"), timeout=30
        ) as other,
    ):
        url = base_url(alice)
        body = {"task": "Review the retry logic", "agents": [{"url": f"{url}/a2a/review"}]}
        body |= {"timeout_s": 120, "id": chosen}
        first = await alice.post("/v1/coordinations", json=body)
        assert first.status_code == 201, first.text
        again = await alice.post("/v1/coordinations", json=body)
        assert again.status_code == 201, again.text
        assert again.json()["id"] == first.json()["id"] == chosen
        assert again.json()["created_at"] == first.json()["created_at"]
        changed = await alice.post("/v1/coordinations", json={**body, "task": "Something else"})
        assert changed.status_code == 409 and "different request" in changed.text, changed.text
        empty = await alice.post("/v1/coordinations", json={**body, "agents": []})
        assert empty.status_code == 422, empty.text

        refused = await other.get(f"/v1/coordinations/{chosen}")
        assert refused.status_code == 404, refused.text
        assert "Review the retry logic" not in refused.text

        done: dict[str, object] = {}
        for _ in range(600):
            done = (await alice.get(f"/v1/coordinations/{chosen}")).json()
            if done["status"] != "running":
                break
            await asyncio.sleep(0.2)
        assert done["status"] == "completed", done

        # Temporal not answering while the result is read: a 503 to retry, not a 500.
        async def temporal_down(*args: object, **kwargs: object) -> None:
            raise RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(WorkflowHandle, "result", temporal_down)
            down = await alice.get(f"/v1/coordinations/{chosen}")
        assert down.status_code == 503, down.text
        assert int(down.headers["retry-after"]) > 0 and "again" in down.json()["detail"]
    assert "No retry logic in pkg/core.py." in str(done["report"])
    assert done["requester"] == "user:alice"
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT tenant_id, action FROM audit_log WHERE subject = %s ORDER BY id", (chosen,)
        )
        actions = [(row["tenant_id"], row["action"]) for row in await cur.fetchall()]
    assert actions.count(("default", "coordination.started")) == 1
    assert ("other-tenant", "coordination.cross_tenant_denied") in actions


async def test_agent_urls_follow_the_webhook_target_policy_and_bad_input_is_a_422(
    store: Store, workspace: Path, keel_app: LaunchKeel
) -> None:
    tenant = f"coord-{uuid.uuid4().hex[:8]}"
    unused = Script(turns=[Turn(content="unused")])
    async with keel_app(unused, headers=auth_headers(tenant, "alice"), worker=False) as http:
        url = base_url(http)
        own = {"url": f"{url}/a2a/review"}
        metadata = {"url": "http://169.254.169.254/latest/meta-data?token=abc"}
        refused = await http.post(
            "/v1/coordinations", json={"task": "Review it", "agents": [own, metadata]}
        )
        assert refused.status_code == 422, refused.text
        [problem] = refused.json()["detail"]
        assert problem["loc"] == ["body", "agents.1.url"], problem
        assert "A2A agent host 169.254.169.254 resolves to 169.254.169.254" in problem["msg"]
        assert "token=abc" not in refused.text

        for bad, field in [
            ({"task": "Review\x00 it"}, "task"),
            ({"task": "x" * 200_001}, "task"),
            ({"agents": [{**own, "name": "n" * 101}]}, "name"),
            ({"agents": [{**own, "name": "Two\nlines"}]}, "name"),
            ({"agents": [{"url": "http://host/\x00"}]}, "url"),
            ({"agents": [{"url": "http://[::1/a2a"}]}, "url"),
            ({"agents": [{"url": "http://host:port/a2a"}]}, "url"),
        ]:
            body = {"task": "Review it", "agents": [own]} | bad
            answer = await http.post("/v1/coordinations", json=body)
            assert answer.status_code == 422, (bad, answer.text)
            assert answer.json()["detail"][0]["loc"][-1] == field, answer.text
    entries = await AuditLog(store.pool).entries(tenant)
    assert [(e.action, e.subject, e.detail["field"]) for e in entries] == [
        ("coordination.target_refused", "169.254.169.254", "agents.1.url")
    ]


async def test_a_card_pointing_at_a_blocked_address_is_refused_in_the_worker_audited_once(
    store: Store,
) -> None:
    tenant = f"coord-{uuid.uuid4().hex[:8]}"
    client = A2AClientActivities(lambda *_: None, audit=AuditLog(store.pool))
    request = DelegateInput(
        url="", text="Review it.", message_id="coordinate-x-0", tenant_id=tenant, requester="u"
    )
    async with fake_agent("http://169.254.169.254/a2a?token=abc") as (url, seen):
        for _ in range(2):  # as Temporal would retry it, had it been retryable
            with pytest.raises(ApplicationError) as caught:
                await ActivityEnvironment().run(
                    client.a2a_send, request.model_copy(update={"url": url})
                )
            assert caught.value.non_retryable and caught.value.type == "A2ATargetRefused"
    assert not any(line.startswith("POST") for line in seen)
    entries = await AuditLog(store.pool).entries(tenant)
    assert [(e.action, e.actor, e.subject, e.detail["host"]) for e in entries] == [
        ("coordination.target_refused", "system", "coordinate-x-0", "169.254.169.254")
    ]
    assert "token=abc" not in str(entries[0].detail)


async def _until(
    read: Callable[[], object], done: Callable[[dict[str, object]], bool], what: str
) -> dict[str, object]:
    """Poll `read` (an awaitable JSON getter) until `done` holds of its answer."""
    answer: dict[str, object] = {}
    for _ in range(300):
        answer = await read()  # type: ignore[misc]
        if done(answer):
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: {answer}")


async def test_a_tenant_lists_its_own_coordinations_newest_first_page_by_page(
    workspace: Path, scripted: Callable[[Script], ScriptedLLMServer], keel_app: LaunchKeel
) -> None:
    llm = scripted(Script(turns=[Turn(content="Nothing to report in pkg/core.py.")]))
    tenant, elsewhere = f"coord-{uuid.uuid4().hex[:8]}", f"coord-{uuid.uuid4().hex[:8]}"
    async with (
        keel_app(llm, headers=auth_headers(tenant, "alice")) as alice,
        httpx.AsyncClient(base_url=base_url(alice), headers=auth_headers(elsewhere, "bob")) as bob,
    ):
        url = base_url(alice)
        agents = [{"url": f"{url}/a2a/review", "name": "Reviewer"}]
        mine = []
        for n in range(3):
            body = {"task": f"Review part {n}", "agents": agents, "timeout_s": 120}
            started = await alice.post("/v1/coordinations", json=body)
            assert started.status_code == 201, started.text
            mine.append(started.json()["id"])
        # Bob chooses one of Alice's ids: his is his own, under the same id.
        theirs = await bob.post(
            "/v1/coordinations",
            json={"task": "Bob's review", "agents": agents, "id": mine[0], "timeout_s": 120},
        )
        assert theirs.status_code == 201, theirs.text

        async def everything() -> dict[str, object]:
            listed = await alice.get("/v1/coordinations", params={"limit": 100})
            assert listed.status_code == 200, listed.text
            return listed.json()  # type: ignore[no-any-return]

        def all_finished(page: dict[str, object]) -> bool:
            shown = page["coordinations"]
            assert isinstance(shown, list)
            return len(shown) == 3 and all(c["status"] == "completed" for c in shown)

        await _until(everything, all_finished, "Alice's three coordinations, finished")

        pages: list[list[dict[str, object]]] = []
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
            page = await alice.get("/v1/coordinations", params=params)
            assert page.status_code == 200, page.text
            pages.append(page.json()["coordinations"])
            cursor = page.json()["next_cursor"]
            if cursor is None:
                break
        assert [len(p) for p in pages] == [2, 1]
        listed = [c for p in pages for c in p]
        assert [c["id"] for c in listed] == mine[::-1]  # newest first
        first = listed[-1]
        assert first["agents"] == agents and first["requester"] == "user:alice"
        assert "Nothing to report in pkg/core.py." in str(first["report"])
        assert [o["status"] for o in first["outcomes"]] == ["completed"]

        async def bobs_list() -> dict[str, object]:
            return (await bob.get("/v1/coordinations")).json()  # type: ignore[no-any-return]

        bobs = await _until(bobs_list, lambda p: bool(p["coordinations"]), "Bob's one")
        [his] = bobs["coordinations"]  # type: ignore[misc]
        assert his["id"] == mine[0] and his["requester"] == "user:bob", his
        assert his["created_at"] == theirs.json()["created_at"] != first["created_at"]

        bad = await alice.get("/v1/coordinations", params={"cursor": "not-a-cursor"})
        assert bad.status_code == 422 and "cursor" in bad.text, bad.text
        nobody = f"coord-{uuid.uuid4().hex[:8]}"
        async with httpx.AsyncClient(base_url=url, headers=auth_headers(nobody, "eve")) as eve:
            empty = await eve.get("/v1/coordinations")
        assert empty.status_code == 200 and empty.json() == {
            "coordinations": [],
            "next_cursor": None,
        }, empty.text


async def test_a_running_coordination_is_cancelled_once_a_finished_one_is_a_409(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
    keel_app: LaunchKeel,
) -> None:
    llm = scripted(Script(turns=[Turn(content="The review, at last.")]))
    tenant, elsewhere = f"coord-{uuid.uuid4().hex[:8]}", f"coord-{uuid.uuid4().hex[:8]}"
    chosen = f"coord-{uuid.uuid4().hex[:8]}"
    llm.hold()
    try:
        async with (
            keel_app(llm, headers=auth_headers(tenant, "alice")) as alice,
            httpx.AsyncClient(
                base_url=base_url(alice), headers=auth_headers(elsewhere, "mallory")
            ) as other,
        ):
            url = base_url(alice)
            body = {"task": "Review it", "agents": [{"url": f"{url}/a2a/review"}], "id": chosen}
            started = await alice.post("/v1/coordinations", json=body)
            assert started.status_code == 201, started.text
            for _ in range(300):  # the remote agent is in its model call, held there
                if llm.total_requests:
                    break
                await asyncio.sleep(0.1)
            assert llm.total_requests

            refused = await other.post(f"/v1/coordinations/{chosen}/cancel")
            assert refused.status_code == 404, refused.text
            assert (await alice.get(f"/v1/coordinations/{chosen}")).json()["status"] == "running"

            cancelled = await alice.post(f"/v1/coordinations/{chosen}/cancel")
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json()["id"] == chosen
            assert cancelled.json()["status"] in ("cancelling", "cancelled"), cancelled.text
            again = await alice.post(f"/v1/coordinations/{chosen}/cancel")
            assert again.status_code in (200, 409), again.text
            if again.status_code == 200:
                assert again.json()["status"] in ("cancelling", "cancelled"), again.text

            async def read() -> dict[str, object]:
                return (await alice.get(f"/v1/coordinations/{chosen}")).json()  # type: ignore[no-any-return]

            ended = await _until(read, lambda c: c["status"] != "cancelling", "cancelled")
            assert ended["status"] == "cancelled" and ended["finished_at"], ended
            assert "cancelled" in str(ended["error"]) and ended["report"] is None
            description = await temporal_client.get_workflow_handle(
                f"coordinate-{chosen}"
            ).describe()
            assert description.status is not None and description.status.name == "CANCELED"

            finished = await alice.post(f"/v1/coordinations/{chosen}/cancel")
            assert finished.status_code == 409, finished.text
            assert "already ended (cancelled)" in finished.json()["detail"], finished.text

            # The agent's task is cancelled too: Keel's agent cancels its run (once the
            # follow's heartbeat has heard of the cancel).
            remote: list[str] = []
            for _ in range(600):
                runs = await store.list_runs(tenant_id=tenant, limit=10, trigger="a2a")
                remote = [r.status for r in runs]
                if remote == ["cancelled"]:
                    break
                await asyncio.sleep(0.1)
            assert remote == ["cancelled"], remote
            llm.release()  # the worker can stop
    finally:
        llm.release()
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT tenant_id, action FROM audit_log WHERE subject = %s ORDER BY id", (chosen,)
        )
        actions = [(row["tenant_id"], row["action"]) for row in await cur.fetchall()]
    assert actions.count((tenant, "coordination.cancel_requested")) == 1
    assert (elsewhere, "coordination.cross_tenant_denied") in actions


async def test_coordinations_started_before_they_carried_a_tenant_tag_are_listed_by_their_memo(
    temporal_client: Client, keel_app: LaunchKeel
) -> None:
    """As `POST /v1/coordinations` started them before: the tenant in the memo only, no
    `KeelTenant`, no agents. And a tenant id no query may quote is matched on the memo."""
    tenant, elsewhere = f"coord-{uuid.uuid4().hex[:8]}", f"o'brien \\ {uuid.uuid4().hex[:8]}"
    idle_queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"  # so they stay running
    started: list[WorkflowHandle[Any, Any]] = []
    for owner in (tenant, elsewhere):
        started.append(
            await temporal_client.start_workflow(
                CoordinatorWorkflow.run,
                CoordinatorInput(task="Review it", agents=[RemoteAgent(url="http://a.example")]),
                id=f"coordinate-old-{uuid.uuid4().hex[:8]}",
                task_queue=idle_queue,
                memo={"tenant_id": owner, "requester": "user:alice", "request_hash": "h"},
            )
        )
    try:
        async with keel_app(Script(turns=[Turn(content="unused")]), worker=False) as stack:
            url = base_url(stack)
            for owner, handle in zip((tenant, elsewhere), started, strict=True):
                async with httpx.AsyncClient(
                    base_url=url, headers=auth_headers(owner, "alice")
                ) as http:

                    async def listed() -> dict[str, object]:
                        return (await http.get("/v1/coordinations")).json()  # type: ignore[no-any-return]

                    page = await _until(
                        listed, lambda p: bool(p["coordinations"]), f"{owner}'s coordination"
                    )
                    listed_ones = page["coordinations"]
                    assert isinstance(listed_ones, list)
                    shown = [(c["id"], c["status"], c["agents"]) for c in listed_ones]
                    assert shown == [(handle.id.removeprefix("coordinate-"), "running", [])]
    finally:
        for handle in started:
            await handle.terminate()
