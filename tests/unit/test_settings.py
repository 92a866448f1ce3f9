"""Settings: environment variable names, secrets, and the one place that reads them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from keel.worker.config.settings import Settings, environment_of, settings_from

ROOT = Path(__file__).parents[2]
SECRET = "sk-test-do-not-print-0123456789"


def env_names() -> set[str]:
    """Every environment variable name Settings could read: aliases and field names."""
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        names.add(name.upper())
        alias = field.validation_alias
        for choice in getattr(alias, "choices", []):
            names.add(str(choice).upper())
    return names


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No variable from the developer's shell or CI leaks into these tests."""
    for name in env_names():
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    yield


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        (
            "TEMPORAL_ADDRESS",
            "temporal.internal:7233",
            "temporal_address",
            "temporal.internal:7233",
        ),
        (
            "DATABASE_URL",
            "postgresql://keel@db:5432/keel",
            "database_url",
            "postgresql://keel@db:5432/keel",
        ),
        (
            "OPENAI_BASE_URL",
            "http://127.0.0.1:8000/v1",
            "openai_base_url",
            "http://127.0.0.1:8000/v1",
        ),
        ("KEEL_MODEL", "gpt-test", "model", "gpt-test"),
        ("KEEL_DATA_DIR", "/var/lib/keel", "data_dir", Path("/var/lib/keel")),
        ("KEEL_WORKSPACE_ROOT", "/srv/code", "workspace_root", Path("/srv/code")),
        ("KEEL_AGENTS_DIR", "/etc/keel/agents", "agents_dir", Path("/etc/keel/agents")),
        ("KEEL_TASK_QUEUE", "keel-eu", "task_queue", "keel-eu"),
        ("TEMPORAL_NAMESPACE", "prod", "temporal_namespace", "prod"),
        ("KEEL_LLM_MAX_ATTEMPTS", "9", "llm_max_attempts", 9),
        ("KEEL_LLM_TIMEOUT_S", "12.5", "llm_timeout_s", 12.5),
        ("KEEL_API_PORT", "9000", "api_port", 9000),
    ],
)
def test_environment_variables_map_to_fields(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str, expected: object
) -> None:
    monkeypatch.setenv(variable, value)
    assert getattr(Settings(), field) == expected


def test_every_field_has_a_working_default() -> None:
    settings = Settings()
    assert settings.temporal_address is None
    assert settings.database_url is None
    assert settings.openai_base_url == "https://api.openai.com/v1"
    assert settings.model == "gpt-4.1-mini"
    assert settings.data_dir == Path.home() / ".keel"
    assert settings.workspace_root == Path.cwd()
    assert settings.agents_dir is None
    assert settings.resolved_api_url == "http://127.0.0.1:8470"


def test_the_api_key_is_a_secret_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    settings = Settings()

    assert isinstance(settings.openai_api_key, SecretStr)
    assert settings.openai_api_key.get_secret_value() == SECRET
    for shown in (
        repr(settings),
        str(settings),
        repr(settings.openai_api_key),
        str(settings.openai_api_key),
        settings.model_dump_json(),
        str(settings.model_dump()),
    ):
        assert SECRET not in shown
    assert "**********" in repr(settings)


def test_an_invalid_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEL_LLM_MAX_ATTEMPTS", "0")
    with pytest.raises(ValidationError, match="KEEL_LLM_MAX_ATTEMPTS"):
        Settings()


@pytest.mark.parametrize(
    ("variable", "field"),
    [("MODEL", "model"), ("DATA_DIR", "data_dir"), ("WORKSPACE_ROOT", "workspace_root")],
)
def test_bare_field_names_are_not_read(
    monkeypatch: pytest.MonkeyPatch, variable: str, field: str
) -> None:
    default = getattr(Settings(), field)
    monkeypatch.setenv(variable, "/from/a/generic/variable")
    assert getattr(Settings(), field) == default


# -- nothing else reads the environment ---------------------------------------------

PACKAGES = ["workflows", "activities", "worker", "api"]
SETTINGS_MODULE = ROOT / "worker" / "settings.py"
ENV_READ = re.compile(r"os\.environ|os\.getenv|getenv\(|from os import [^\n]*\benviron\b")


def source_files() -> list[Path]:
    files = [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "sample_project" not in path.parts
    ]
    assert len(files) > 10, "the scan found too few modules; did the layout change?"
    return files


def test_only_settings_reads_the_environment() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in source_files()
        if path != SETTINGS_MODULE
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if ENV_READ.search(line)
    ]
    assert not offenders, (
        "Read settings through keel.worker.config.settings.Settings instead:\n"
        + "\n".join(offenders)
    )


@pytest.mark.parametrize(
    "line",
    [
        'url = os.environ["DATABASE_URL"]',
        'url = os.environ.get("DATABASE_URL")',
        'url = os.getenv("DATABASE_URL")',
        'url = getenv("DATABASE_URL")',
        "from os import environ",
        "from os import path, environ",
    ],
)
def test_the_scan_catches_each_spelling(line: str) -> None:
    assert ENV_READ.search(line)


def test_environment_of_gives_another_process_the_same_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    given = settings_from(
        temporal_address="127.0.0.1:7999",
        openai_api_key="sk-test-secret",
        data_dir=tmp_path / "data",
        llm_max_attempts=2,
        workflow_sandbox=True,
    )
    names = ("temporal_address", "openai_api_key", "data_dir", "llm_max_attempts")
    env = environment_of(given, *names, "database_url", "workflow_sandbox")
    assert "DATABASE_URL" not in env  # unset fields are left to the other process
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    read = Settings()
    for name in (*names, "workflow_sandbox"):
        assert getattr(read, name) == getattr(given, name), name
