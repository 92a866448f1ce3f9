"""Eval scenario files: what to run, which decisions to give, and what to expect.

A scenario is one YAML file, validated here, so a typo fails before any run starts
with the file and the field named. Paths inside a scenario are relative to its file;
`bundled:NAME` names what ships with Keel (`bundled:sample_project`, the project
`keel demo` reviews; `bundled:demo_review.yaml`, the demo's script).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal, Self

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)

from keel.activities.llm.prices import ModelPrice
from keel.worker.scripted.llm import Script

__all__ = [
    "BUNDLED",
    "Decision",
    "Expectations",
    "FileExpectation",
    "FindingExpectation",
    "LimitExpectations",
    "ModelChoice",
    "ReportExpectations",
    "Scenario",
    "ScenarioError",
    "ToolExpectation",
    "WorkspaceSpec",
    "bundled_scenarios",
    "load_scenario",
    "load_scenarios",
    "scenario_files",
]

BUNDLED = "bundled:"
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


class ScenarioError(ValueError):
    """A scenario file is missing, unreadable or invalid; the message names file and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkspaceSpec(_Strict):
    """The directory the run works on: a copy of `dir`, with `files` written on top."""

    dir: str | None = None
    """A directory (relative to the scenario file, or `bundled:sample_project`) to copy."""
    files: dict[str, str] = Field(default_factory=dict)
    """Files written inline: relative path → content."""

    @model_validator(mode="after")
    def _paths_stay_inside(self) -> Self:
        for path in self.files:
            parts = Path(path).parts
            if Path(path).is_absolute() or ".." in parts or not parts:
                raise ValueError(f"workspace file {path!r} must be a relative path inside it")
        return self


def _script_kind(value: object) -> str:
    return "script file" if isinstance(value, str) else "inline script"


# Tagged, so an error inside an inline script names its field, not both union members.
ScriptSource = Annotated[
    Annotated[str, Tag("script file")] | Annotated[Script, Tag("inline script")],
    Discriminator(_script_kind),
]
_TAGS = {"script file", "inline script"}


class ModelChoice(_Strict):
    """The model the run talks to: a script on the scripted server, or the configured one."""

    script: ScriptSource | None = None
    """A script file (relative, or `bundled:demo_review.yaml`) or the script inline."""
    configured: bool = False
    """Use the configured OpenAI-compatible endpoint and model (`OPENAI_BASE_URL`, `KEEL_MODEL`)."""
    name: str | None = None
    """With `configured`: a model name other than `KEEL_MODEL`."""
    price: ModelPrice | None = None
    """With a script: USD per million tokens, so cost limits can be checked offline."""

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if (self.script is None) == (not self.configured):
            raise ValueError("give either `script` (the scripted model) or `configured: true`")
        if self.configured and self.price is not None:
            raise ValueError("`price` is for scripts; the configured model uses KEEL_PRICES")
        if self.script is not None and self.name is not None:
            raise ValueError("`name` is for `configured`; a script's model is named for you")
        return self


class Decision(_Strict):
    """How to answer what the run asks, for the requests this rule matches (first match)."""

    decision: Literal["approve", "approve_always", "reject", "answer"]
    tool: str | None = None
    """Only requests for this tool (`write_file`, `bash`; `ask_user` for questions)."""
    subject: str | None = None
    """Only requests whose subject (path, command line) matches this glob."""
    text: str | None = None
    """The answer to a question, or the reason of a rejection (told to the model)."""

    @model_validator(mode="after")
    def _answer_has_text(self) -> Self:
        if self.decision == "answer" and not self.text:
            raise ValueError("an `answer` decision needs `text`")
        return self


class ToolExpectation(_Strict):
    """A tool call the run made (or must not make), with glob patterns over its arguments."""

    name: str
    arguments: dict[str, str] = Field(default_factory=dict)
    """Argument name → glob its value (as text) must match, e.g. `{path: "inventory/*"}`."""
    succeeded: bool = False
    """Count only calls that ran without an error (not rejected, denied or failed)."""


class FileExpectation(_Strict):
    """A file in the workspace after the run."""

    path: str
    exists: bool = True
    contains: str | None = None


class ReportExpectations(_Strict):
    """The final answer."""

    contains: list[str] = Field(default_factory=list)
    matches: list[str] = Field(default_factory=list)
    """Regular expressions (Python syntax, multiline), each must match somewhere."""
    not_contains: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _patterns_compile(self) -> Self:
        for i, pattern in enumerate(self.matches):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"matches[{i}] {pattern!r} is not a regular expression: {exc}"
                ) from None
        return self


class FindingExpectation(_Strict):
    """A finding the agent reported: its file (glob) and, optionally, its severity."""

    file: str
    severity: Literal["critical", "high", "medium", "low", "info"] | None = None


class LimitExpectations(_Strict):
    """Upper bounds on what the run may use (sub-agents included)."""

    max_steps: int | None = Field(default=None, ge=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    max_cost_usd: float | None = Field(default=None, ge=0)
    max_duration_s: float | None = Field(default=None, gt=0)


class Expectations(_Strict):
    """What a passing run looks like; every part given must hold."""

    status: Literal["completed", "failed", "cancelled"] | None = "completed"
    stop_reason: str | None = None
    tools_called: list[ToolExpectation] = Field(default_factory=list)
    tools_not_called: list[ToolExpectation] = Field(default_factory=list)
    files_read: list[str] = Field(default_factory=list)
    """Globs: each must match a path `read_file` read without an error (sub-agents too)."""
    report: ReportExpectations = Field(default_factory=ReportExpectations)
    findings: list[FindingExpectation] = Field(default_factory=list)
    workspace: list[FileExpectation] = Field(default_factory=list)
    limits: LimitExpectations = Field(default_factory=LimitExpectations)


class Scenario(_Strict):
    """One eval scenario, as its file says."""

    name: str = Field(default="", max_length=80)
    """Defaults to the file name without `.yaml`."""
    description: str = ""
    agent: str = Field(min_length=1)
    input: str = Field(min_length=1)
    workspace: WorkspaceSpec = Field(default_factory=WorkspaceSpec)
    model: ModelChoice
    decisions: list[Decision] = Field(default_factory=list)
    expect: Expectations = Field(default_factory=Expectations)
    timeout_s: float = Field(default=600, gt=0)
    """A run still going after this long is cancelled and fails."""
    source: Path = Field(default=Path("."), exclude=True)
    """The file it came from (set by the loader)."""

    @property
    def slug(self) -> str:
        """The name as it may appear in run ids and model names."""
        return _SLUG.sub("-", self.name).strip("-.")[:48] or "scenario"

    @property
    def scripted(self) -> bool:
        return self.model.script is not None

    def script(self) -> Script:
        """The scenario's script, read from its file when it names one."""
        script = self.model.script
        if isinstance(script, Script):
            return script
        if script is None:
            raise ScenarioError(f"{self.source}: model: the scenario uses the configured model")
        path = self.resolve(script, bundled=resources.files("keel.worker") / "scripts")
        try:
            return Script.load(path)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise ScenarioError(f"{self.source}: model.script: {path}: {exc}") from None

    def workspace_dir(self) -> Path | None:
        """The directory to copy into the run's workspace, if the scenario names one."""
        if self.workspace.dir is None:
            return None
        path = self.resolve(self.workspace.dir, bundled=resources.files("keel.api"))
        if not path.is_dir():
            raise ScenarioError(f"{self.source}: workspace.dir: {path} is not a directory")
        return path

    def resolve(self, raw: str, *, bundled: object) -> Path:
        """A path of the scenario: `bundled:NAME` under `bundled`, else next to the file."""
        if raw.startswith(BUNDLED):
            return Path(str(bundled)) / raw.removeprefix(BUNDLED)
        path = Path(raw).expanduser()
        return path if path.is_absolute() else self.source.parent / path


def _field_errors(path: Path, exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"] if p not in _TAGS) or "(top level)"
        lines.append(f"{path}: {where}: {error['msg']}")
    return "\n".join(lines)


def load_scenario(path: Path) -> Scenario:
    """One scenario file, validated; every problem names the file and the field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read it: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping with `agent`, `input` and `model`")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(_field_errors(path, exc)) from None
    scenario = scenario.model_copy(
        update={"source": path.resolve(), "name": scenario.name or path.stem}
    )
    scenario.workspace_dir()
    if scenario.scripted:
        scenario.script()
    return scenario


def scenario_files(paths: list[Path]) -> list[Path]:
    """The files named, and every `*.yaml`/`*.yml` below the directories named, in order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml"))
        elif path.exists():
            found.append(path)
        else:
            raise ScenarioError(f"{path}: no such file or directory")
    if not found:
        raise ScenarioError(f"No scenario files (*.yaml) in {', '.join(map(str, paths))}.")
    return found


def load_scenarios(paths: list[Path]) -> list[Scenario]:
    """Every scenario of `paths`; all problems of all files are reported together."""
    scenarios: list[Scenario] = []
    problems: list[str] = []
    for path in scenario_files(paths):
        try:
            scenarios.append(load_scenario(path))
        except ScenarioError as exc:
            problems.append(str(exc))
    names = [s.name for s in scenarios]
    for name in sorted({n for n in names if names.count(n) > 1}):
        files = ", ".join(str(s.source) for s in scenarios if s.name == name)
        problems.append(f"{files}: name: {name!r} is used by more than one scenario")
    if problems:
        raise ScenarioError("\n".join(problems))
    return scenarios


def bundled_scenarios() -> Path:
    """The directory of Keel's built-in scenarios."""
    return Path(str(resources.files("keel.api.evals") / "scenarios"))
