"""Evals end to end: scenarios run as real durable runs through Keel's HTTP API (a real
worker, the dev server, Postgres and the scripted model over HTTP), and `keel eval`
as a user runs it."""

from __future__ import annotations

import json
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from temporalio.client import Client

from keel.activities.store.audit import AuditLog
from keel.activities.store.eval_store import EvalStore
from keel.activities.store.interaction_store import InteractionStore
from keel.activities.store.run_store import Store
from keel.api.cli.client import KeelClient
from keel.api.evals.results import EvalReport
from keel.api.evals.runner import EvalRunner, model_names
from keel.api.evals.scenario import Decision, Scenario, bundled_scenarios, load_scenarios
from keel.api.evals.stack import scripted_models
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import TemporalDevServer, free_port
from keel.worker.scripted.llm import Script, ScriptedLLMServer, Turn
from tests.conftest import JWT_SECRET, auth_headers, token_for
from tests.integration.keel_http import base_url, keel_api
from tests.integration.test_cli import clean_env, keel

MakeSettings = Callable[..., Settings]
RunEvals = Callable[..., Awaitable[EvalReport]]


def built_in(name: str) -> Scenario:
    return next(s for s in load_scenarios([bundled_scenarios()]) if s.name == name)


@pytest.fixture
def run_evals(
    temporal_client: Client, store: Store, settings_for: MakeSettings, tmp_path: Path
) -> RunEvals:
    """Run scenarios against a worker and API of this test, as `keel eval` does."""

    async def run(scenarios: list[Scenario], *, repeat: int = 1) -> EvalReport:
        models = model_names(scenarios)
        work = tmp_path / "eval-workspaces"
        work.mkdir(exist_ok=True)
        with scripted_models(scenarios, models) as (server, prices):
            settings = settings_for(server, work, api_port=free_port(), prices=prices)
            async with (
                keel_api(temporal_client, store, settings) as http,
                KeelClient(base_url(http), token=token_for()) as client,
            ):
                runner = EvalRunner(client, work, concurrency=4)
                return await runner.run(scenarios, models, repeat=repeat)

    return run


def failures_of(report: EvalReport) -> dict[str, list[str]]:
    return {s.name: s.failures for s in report.scenarios}


async def test_the_built_in_scenarios_pass(run_evals: RunEvals) -> None:
    scenarios = load_scenarios([bundled_scenarios()])
    report = await run_evals(scenarios)
    assert report.ok, failures_of(report)
    assert {s.agent for s in report.scenarios} == {"review", "investigate", "explore", "build"}
    review = next(s for s in report.scenarios if s.name == "review-sample-project")
    # The scenario's price reached the worker: the run has a cost.
    assert review.attempts[0].cost_usd > 0 and review.attempts[0].tokens > 0


async def test_a_wrong_expectation_fails_with_a_message_naming_it(
    run_evals: RunEvals,
) -> None:
    good = built_in("investigate-cites-evidence")
    expect = good.expect.model_copy(
        update={
            "report": good.expect.report.model_copy(
                update={"contains": [*good.expect.report.contains, "SQL injection"]}
            ),
            "files_read": ["inventory/pricing.py"],
        }
    )
    wrong = good.model_copy(update={"name": "wrong", "expect": expect})
    report = await run_evals([wrong])
    assert not report.ok
    assert failures_of(report)["wrong"] == [
        "expect.files_read[0]: nothing matching 'inventory/pricing.py' was read; "
        "read: inventory/store.py",
        "expect.report.contains[2]: the report does not contain 'SQL injection'",
    ]


async def test_an_approval_scenario_passes_when_it_approves_and_fails_when_it_rejects(
    run_evals: RunEvals, store: Store
) -> None:
    approving = built_in("build-writes-after-approval")
    rejecting = approving.model_copy(
        update={
            "name": "rejecting",
            "decisions": [Decision(tool="write_file", decision="reject", text="not now")],
        }
    )
    report = await run_evals([approving, rejecting])
    failures = failures_of(report)
    assert failures["build-writes-after-approval"] == []
    assert [f.split(":", 1)[0] for f in failures["rejecting"]] == [
        "expect.tools_called[0]",
        "expect.workspace[0]",
    ]
    assert "CHANGELOG.md does not exist after the run" in failures["rejecting"][1]
    # The decisions went through the API as a person's do: recorded on the interactions.
    run_ids = {s.name: s.attempts[0].run_id for s in report.scenarios}
    for name, decision in (("build-writes-after-approval", "approve"), ("rejecting", "reject")):
        interactions = await InteractionStore(store.pool).for_run(str(run_ids[name]))
        assert [ia.decision for ia in interactions] == [decision]


async def test_a_question_gets_the_scenarios_answer(run_evals: RunEvals, store: Store) -> None:
    asking = Scenario.model_validate(
        {
            "name": "asks",
            "agent": "build",
            "input": "Add a changelog.",
            "model": {
                "script": {
                    "turns": [
                        {
                            "tool_calls": [
                                {"name": "ask_user", "arguments": {"question": "Which version?"}}
                            ]
                        },
                        {"content": "## Changes\nnone yet"},
                    ]
                }
            },
            "decisions": [{"tool": "ask_user", "decision": "answer", "text": "1.0, please"}],
            "expect": {"tools_called": [{"name": "ask_user", "succeeded": True}]},
        }
    )
    report = await run_evals([asking])
    assert report.ok, failures_of(report)
    [ia] = await InteractionStore(store.pool).for_run(str(report.scenarios[0].attempts[0].run_id))
    assert (ia.kind, ia.decision, ia.answer) == ("ask_user", "answer", "1.0, please")


async def test_a_request_without_a_decision_fails_and_the_run_is_cancelled(
    run_evals: RunEvals,
) -> None:
    undecided = built_in("build-writes-after-approval").model_copy(
        update={"name": "undecided", "decisions": []}
    )
    report = await run_evals([undecided])
    attempt = report.scenarios[0].attempts[0]
    assert attempt.failures[0] == (
        "decisions: the run asked for approval of write_file 'CHANGELOG.md' and no decision "
        "matches it; the run was cancelled"
    )
    assert attempt.status == "cancelled"


SCENARIO = """\
description: One read, one answer; the answer's first request fails once per server.
agent: investigate
input: What does pkg/core.py do?
workspace:
  files: {{"pkg/core.py": "def add(a, b):\\n    return a + b\\n"}}
model:
  script:
    turns:
      - tool_calls: [{{name: read_file, arguments: {{path: pkg/core.py}}}}]
        completion_tokens: 20
      - content: "{answer}"
        completion_tokens: {tokens}
        fail_status: {fail_status}
        fail_times: {fail_times}
expect:
  stop_reason: final_answer
  files_read: [pkg/core.py]
  report: {{contains: ["## Answer"]}}
"""


def scenario_file(
    path: Path,
    *,
    answer: str = "## Answer\\n`add` adds (pkg/core.py:1).",
    tokens: int = 30,
    fail_times: int = 0,
) -> Path:
    status = 400 if fail_times else "null"
    path.write_text(
        SCENARIO.format(answer=answer, tokens=tokens, fail_status=status, fail_times=fail_times)
    )
    return path


def eval_env(
    server: TemporalDevServer, database_url: str, data: Path, **extra: str
) -> dict[str, str]:
    """`keel eval` on the test session's Temporal and Postgres (its own worker and API)."""
    return clean_env(
        TEMPORAL_ADDRESS=server.address,
        DATABASE_URL=database_url,
        KEEL_DATA_DIR=str(data),
        KEEL_JWT_SECRET=JWT_SECRET,
        COLUMNS="200",
        **extra,
    )


@pytest.mark.slow
async def test_keel_eval_repeats_writes_junit_and_markdown_and_compares_a_baseline(
    temporal_server: TemporalDevServer, database_url: str, tmp_path: Path, store: Store
) -> None:
    env = eval_env(temporal_server, database_url, tmp_path / "data")
    scenario = scenario_file(tmp_path / "explain-add.yaml", fail_times=1)
    out = tmp_path / "out"
    code, printed = await keel(
        "eval",
        str(scenario),
        "--repeat",
        "3",
        "--results",
        str(out / "first.json"),
        "--junit",
        str(out / "junit.xml"),
        "--markdown",
        str(out / "report.md"),
        env=env,
    )
    # The first request for the answer fails (HTTP 400 fails a run at once): 2 of 3 pass.
    assert code == 1, printed
    assert re.search(r"explain-add\s+│ FAIL\s+│ 2/3 \(67%\)", printed), printed
    assert "expect.status: wanted completed, the run ended failed" in printed
    suite = ET.parse(out / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("3", "1")
    assert [c.get("name") for c in suite.iter("testcase")] == [
        "explain-add #1",
        "explain-add #2",
        "explain-add #3",
    ]
    assert "| explain-add | **FAIL** | 2/3 |" in (out / "report.md").read_text()
    # The results are kept with the runs, for the console.
    recorded = re.search(r"Recorded as (eval-\S+) ", printed)
    assert recorded is not None, printed
    row = await EvalStore(store.pool).get("default", recorded.group(1))
    assert row is not None and (row.repeat, row.scenarios, row.passed) == (3, 1, 0)

    scenario_file(scenario)  # the provider no longer fails: every run passes
    code, printed = await keel(
        "eval", str(scenario), "--results", str(out / "baseline.json"), env=env
    )
    assert code == 0, printed
    baseline = json.loads((out / "baseline.json").read_text())
    assert baseline["scenarios"][0]["attempts"][0]["passed"] is True

    # A change to the script: a longer answer that drops the heading the scenario expects.
    scenario_file(scenario, answer="It adds two numbers.", tokens=900)
    code, printed = await keel(
        "eval",
        str(scenario),
        "--baseline",
        str(out / "baseline.json"),
        "--markdown",
        str(out / "against.md"),
        env=env,
    )
    assert code == 1, printed
    assert "expect.report.contains[0]: the report does not contain '## Answer'" in printed
    assert re.search(r"explain-add\s+│ worse\s+│ pass rate 100% → 0%; tokens \d+ → \d+", printed)
    assert "| explain-add | worse | pass rate 100% → 0%; tokens" in (out / "against.md").read_text()


async def test_keel_eval_runs_scenarios_on_the_configured_model(
    temporal_server: TemporalDevServer,
    database_url: str,
    tmp_path: Path,
    scripted: Callable[[Script], ScriptedLLMServer],
) -> None:
    llm = scripted(Script(name="team-model", turns=[Turn(content="## Answer\nIt adds.")]))
    scenario = tmp_path / "real.yaml"
    scenario.write_text(
        "agent: investigate\ninput: What does it do?\nmodel: {configured: true}\n"
        "workspace: {files: {a.py: 'x = 1'}}\n"
        "expect: {report: {contains: ['## Answer']}, tools_not_called: [{name: read_file}]}\n"
    )
    env = eval_env(
        temporal_server,
        database_url,
        tmp_path / "data",
        OPENAI_BASE_URL=llm.base_url,
        KEEL_MODEL="team-model",
    )
    code, printed = await keel("eval", str(scenario), env=env)
    assert code == 0, printed
    assert re.search(r"real\s+│ pass\s+│ 1/1", printed), printed
    assert llm.last_request(0)["model"] == "team-model"


async def test_keel_eval_refuses_an_invalid_scenario_before_running(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: review\ninput: x\nmodel: {script: missing.yaml}\n")
    code, printed = await keel("eval", str(bad), env=clean_env(KEEL_DATA_DIR=str(tmp_path)))
    assert code == 2
    assert f"{bad}: model.script: {tmp_path / 'missing.yaml'}" in printed


async def test_eval_results_are_recorded_once_per_tenant_and_read_only_there(
    run_evals: RunEvals,
    temporal_client: Client,
    store: Store,
    settings_for: MakeSettings,
    tmp_path: Path,
) -> None:
    report = await run_evals([built_in("explore-reads-named-files")])
    eval_id = f"eval-test-{uuid.uuid4().hex[:8]}"
    body = {"id": eval_id, "report": report.model_dump(mode="json")}
    tenant = f"evals-{uuid.uuid4().hex[:6]}"
    alice, mallory = auth_headers(tenant, "alice"), auth_headers("other-tenant", "mallory")
    settings = settings_for("http://127.0.0.1:9/v1", tmp_path, api_port=free_port())
    async with keel_api(temporal_client, store, settings, worker=False) as http:
        first = await http.post("/v1/evals", headers=alice, json=body)
        assert first.status_code == 200, first.text
        recorded = first.json()
        assert (recorded["passed"], recorded["scenarios"], recorded["requester"]) == (1, 1, "alice")
        again = await http.post("/v1/evals", headers=alice, json=body)
        assert again.status_code == 200 and again.json() == recorded  # a retry is safe
        other = {**body, "report": {**body["report"], "repeat": 7}}
        conflict = await http.post("/v1/evals", headers=alice, json=other)
        assert conflict.status_code == 409 and "another report" in conflict.text

        listed = (await http.get("/v1/evals", headers=alice)).json()
        assert [e["id"] for e in listed] == [eval_id]
        read = (await http.get(f"/v1/evals/{eval_id}", headers=alice)).json()
        assert EvalReport.model_validate(read["report"]) == report

        assert (await http.get(f"/v1/evals/{eval_id}", headers=mallory)).status_code == 404
        assert eval_id not in [
            e["id"] for e in (await http.get("/v1/evals", headers=mallory)).json()
        ]
        bad = await http.post("/v1/evals", headers=alice, json={"id": eval_id, "report": {}})
        assert bad.status_code == 422
    denied = await AuditLog(store.pool).entries("other-tenant", after_id=0, limit=1000)
    assert any(e.action == "eval.cross_tenant_denied" and e.subject == eval_id for e in denied)
