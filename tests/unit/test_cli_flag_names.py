"""CLI errors name the flag the user typed, whether the CLI or the API found the fault."""

from __future__ import annotations

from pathlib import Path

import httpx
from typer.testing import CliRunner

from keel.api.cli.client import _explain
from keel.api.cli.flag_names import error_lines, field_label
from keel.api.cli.main import app

runner = CliRunner()


def test_every_zero_names_the_flag_not_the_field(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["schedules", "create", "review", "Review.", "--every", "0", "--workspace", str(tmp_path)],
    )
    assert result.exit_code == 1
    assert "--every:" in result.output
    assert "interval_s" not in result.output


def test_an_api_validation_error_names_the_flag() -> None:
    body = {
        "detail": [
            {"loc": ["body", "interval_s"], "msg": "Input should be greater than 0"},
            {"loc": ["body", "time_zone"], "msg": "Value error, unknown time zone Moon/Base"},
        ]
    }
    response = httpx.Response(422, json=body)
    assert _explain(response) == (
        "422: --every: Input should be greater than 0; --tz: unknown time zone Moon/Base"
    )


def test_fields_without_a_flag_keep_their_path() -> None:
    assert field_label(["body", "limits", "max_steps"]) == "limits.max_steps"
    assert field_label(["input"]) == "PROMPT"
    assert error_lines([{"loc": [], "msg": "bad"}], default="RunCreate") == ["RunCreate: bad"]


def test_an_agent_url_the_api_refused_names_the_agent_flag() -> None:
    body = {"detail": [{"loc": ["body", "agents.1.url"], "msg": "The A2A agent host h ..."}]}
    said = _explain(httpx.Response(422, json=body))
    assert said == "422: --agent: The A2A agent host h ..."
