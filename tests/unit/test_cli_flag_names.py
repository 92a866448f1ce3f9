"""CLI errors name the flag the user typed, whether the CLI or the API found the fault."""

from __future__ import annotations

import contextvars
from pathlib import Path

import httpx
from typer.testing import CliRunner

from keel.api.cli.client import _explain
from keel.api.cli.flag_names import error_lines, field_label
from keel.api.cli.main import app
from keel.api.cli.request_body import request_body
from keel.api.core.schemas.runs import RunCreate

runner = CliRunner()


def test_every_zero_names_the_flag_not_the_field(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["schedules", "create", "review", "Review.", "--every", "0", "--workspace", str(tmp_path)],
    )
    assert result.exit_code == 1
    assert "--every:" in result.output
    assert "interval_s" not in result.output


def test_an_api_validation_error_names_the_flag_and_the_value() -> None:
    # As a FastAPI without Keel's handler answers: pydantic's words, its type and context.
    body = {
        "detail": [
            {
                "loc": ["body", "interval_s"],
                "msg": "Input should be greater than 0",
                "type": "greater_than",
                "input": 0,
                "ctx": {"gt": 0},
            },
            {"loc": ["body", "time_zone"], "msg": "Value error, unknown time zone Moon/Base"},
        ]
    }
    response = httpx.Response(422, json=body)
    assert _explain(response) == (
        "--every: Must be more than 0, not 0; --tz: Unknown time zone Moon/Base"
    )


def test_fields_without_a_flag_keep_their_path() -> None:
    assert field_label(["body", "limits", "max_steps"]) == "limits.max_steps"
    assert field_label(["input"]) == "PROMPT"
    assert error_lines([{"loc": [], "msg": "bad"}], default="RunCreate") == ["RunCreate: Bad"]


def test_an_agent_url_the_api_refused_names_the_agent_flag() -> None:
    body = {"detail": [{"loc": ["body", "agents.1.url"], "msg": "The A2A agent host h ..."}]}
    said = _explain(httpx.Response(422, json=body))
    assert said == "--agent: The A2A agent host h ..."


def test_the_apis_refusal_reads_as_its_sentence_naming_what_the_user_typed(
    tmp_path: Path,
) -> None:
    unknown = {
        "detail": [
            {
                "loc": ["body", "agent"],
                "msg": "Unknown agent 'nope'. Known agents: build, review.",
                "type": "value_error",
            }
        ]
    }
    assert _explain(httpx.Response(422, json=unknown)) == (
        "Unknown agent 'nope'. Known agents: build, review."
    )
    # `keel review PATH` takes the workspace as PATH: the API's answer says PATH, too.
    too_long = {
        "detail": [{"loc": ["body", "workspace"], "msg": "Too long: at most 4096 characters."}]
    }

    def review_command() -> str:
        request_body(
            RunCreate,
            flags={"agent": "--agent", "input": "--prompt", "workspace": "PATH"},
            agent="review",
            input="Review it.",
            workspace=str(tmp_path),
        )
        return _explain(httpx.Response(422, json=too_long))

    said = contextvars.copy_context().run(review_command)
    assert said == "PATH: Too long: at most 4096 characters.", said
    assert _explain(httpx.Response(422, json=too_long)).startswith("--workspace: ")
    assert _explain(httpx.Response(404, json={"detail": "No run run-x."})) == "No run run-x."
    assert _explain(httpx.Response(503, json={"detail": "Retry."})) == "503: Retry."
