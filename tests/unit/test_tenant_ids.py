"""Scoped keys: how a tenant's id is kept when another tenant holds it, and shown again."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from keel.activities.store.records import RunRecord
from keel.api.core.schedules.specs import run_workflow_id
from keel.api.core.schemas.common import ID_PATTERN
from keel.api.core.schemas.runs import RunPublic
from keel.api.core.tenant_ids import in_view, in_view_data, interaction_key, scoped


def run(run_id: str, tenant: str = "acme") -> RunRecord:
    return RunRecord(
        id=run_id,
        tenant_id=tenant,
        session_id=scoped(tenant, "ses-1") if "~" in run_id else "ses-1",
        agent="review",
        model="m",
        requester="user:a",
        trigger="api",
        parent_run_id=None,
        workspace="/w",
        input="x",
        status="completed",
        stop_reason=None,
        error=None,
        report=None,
        steps=0,
        tool_calls=0,
        prompt_tokens=0,
        completion_tokens=0,
        created_at=datetime.now(UTC),
        started_at=None,
        finished_at=None,
    )


def test_a_scoped_key_is_no_chosen_id_and_shows_as_the_id_to_its_tenant_only() -> None:
    key = scoped("acme", "nightly")
    assert not re.match(ID_PATTERN, key)
    assert in_view("acme", key) == "nightly"
    assert in_view("other", key) == key
    assert in_view("acme", "nightly") == "nightly"  # an id kept as it is stays so


def test_derived_ids_carry_the_scope_and_show_without_it() -> None:
    parent = scoped("acme", "r1")
    assert in_view("acme", f"{parent}-task-2-0:ia-1-1") == "r1-task-2-0:ia-1-1"
    data = {"run_id": f"{parent}-task-2-0", "pending": [f"{parent}-task-2-0:ia-1-1"], "n": 3}
    assert in_view_data("acme", data) == {
        "run_id": "r1-task-2-0",
        "pending": ["r1-task-2-0:ia-1-1"],
        "n": 3,
    }
    assert in_view("acme", run_workflow_id(scoped("acme", "nightly")) + "-2026") == (
        "run-nightly-2026"
    )
    assert run_workflow_id("nightly") == "run-nightly"


def test_an_interaction_named_by_the_caller_maps_to_its_key() -> None:
    scoped_run, plain_run = run(scoped("acme", "r1")), run("r1")
    assert interaction_key(scoped_run, "ia-1-2") == "ia-1-2"
    assert interaction_key(scoped_run, "r1-task-2-0:ia-1-1") == "acme~r1-task-2-0:ia-1-1"
    assert interaction_key(scoped_run, "acme~r1-task-2-0:ia-1-1") == "acme~r1-task-2-0:ia-1-1"
    assert interaction_key(plain_run, "r1-task-2-0:ia-1-1") == "r1-task-2-0:ia-1-1"


def test_a_run_view_shows_its_ids_as_chosen() -> None:
    public = RunPublic.from_record(run(scoped("acme", "r1")))
    assert (public.id, public.session_id) == ("r1", "ses-1")
