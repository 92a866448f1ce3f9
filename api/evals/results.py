"""What an eval found: one result per attempt, pass rates per scenario, the result file
that a later `keel eval --baseline` compares against, and that comparison."""

from __future__ import annotations

from pathlib import Path
from statistics import fmean
from typing import Annotated, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    model_validator,
)

__all__ = ["AttemptResult", "Change", "EvalReport", "ScenarioResult", "compare"]

# Results arrive over HTTP too (`POST /v1/evals`): numbers and flags must be what they
# say, not a `false` read as 0 or a "3" read as 3.
Count = Annotated[int, Strict(), Field(ge=0)]
Amount = Annotated[float, Strict(), Field(ge=0)]
Flag = Annotated[bool, Strict()]
Text = Annotated[str, Strict(), Field(max_length=20_000)]
Name = Annotated[str, Strict(), Field(max_length=4096)]


def _written_time(value: object) -> object:
    if isinstance(value, (int, float)):  # bool included: an epoch number is no ISO time
        raise ValueError("a time is an ISO 8601 string with its offset, e.g. 2026-12-01T12:00:00Z")
    return value


Moment = Annotated[AwareDatetime, BeforeValidator(_written_time)]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AttemptResult(_Wire):
    """One run of one scenario and what its expectations made of it."""

    attempt: Annotated[int, Strict(), Field(ge=1)]
    run_id: Name | None
    """None when the run could not even start (the reason is the failure)."""
    passed: Flag
    failures: list[Text] = Field(default_factory=list, max_length=1000)
    """One sentence per expectation that did not hold, starting with its field."""
    status: Name | None = None
    stop_reason: Name | None = None
    steps: Count = 0
    tool_calls: Count = 0
    tokens: Count = 0
    cost_usd: Amount = 0.0
    duration_s: Amount = 0.0


class ScenarioResult(_Wire):
    """Every attempt of one scenario."""

    name: Name
    file: Name
    agent: Name
    attempts: list[AttemptResult] = Field(min_length=1, max_length=1000)

    @property
    def passes(self) -> int:
        return sum(a.passed for a in self.attempts)

    @property
    def pass_rate(self) -> float:
        return self.passes / len(self.attempts) if self.attempts else 0.0

    def mean(
        self, field: Literal["steps", "tool_calls", "tokens", "cost_usd", "duration_s"]
    ) -> float:
        return fmean(getattr(a, field) for a in self.attempts) if self.attempts else 0.0

    @property
    def failures(self) -> list[str]:
        """Distinct failure sentences, in the order they first happened."""
        return list(dict.fromkeys(f for a in self.attempts for f in a.failures))


class EvalReport(_Wire):
    """The result file of one `keel eval`."""

    started_at: Moment
    finished_at: Moment
    repeat: Annotated[int, Strict(), Field(ge=1, le=1000)]
    min_pass_rate: Annotated[float, Strict(), Field(ge=0, le=1)] = 1.0
    """A scenario passes when at least this share of its attempts passed."""
    scenarios: list[ScenarioResult] = Field(max_length=1000)

    @model_validator(mode="after")
    def _ends_after_it_starts(self) -> Self:
        if self.finished_at < self.started_at:
            raise ValueError("finished_at is before started_at")
        return self

    def passed(self, scenario: ScenarioResult) -> bool:
        return scenario.pass_rate >= self.min_pass_rate

    @property
    def ok(self) -> bool:
        return all(self.passed(s) for s in self.scenarios)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> EvalReport:
        """A result file written by `keel eval`; a clear error when it is not one."""
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"{path}: cannot read the baseline: {exc.strerror}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(
                f"{path}: not a `keel eval` result file ({where}: {first['msg']}); "
                "pass the JSON that `keel eval --results` wrote."
            ) from None


Verdict = Literal["better", "worse", "same", "new", "gone"]


class Change(BaseModel):
    """How one scenario moved against the baseline."""

    name: str
    verdict: Verdict
    pass_rate: float | None
    baseline_pass_rate: float | None
    tokens: float | None
    baseline_tokens: float | None
    cost_usd: float | None
    baseline_cost_usd: float | None
    notes: list[str] = Field(default_factory=list)
    """What moved, in words: `pass rate 100% → 0%`, `tokens +25%`."""


# A change in mean tokens or cost smaller than this share is noise, not a verdict.
RELATIVE_TOLERANCE = 0.05


def _moved(label: str, now: float, before: float, money: bool = False) -> tuple[int, str | None]:
    """-1 if it grew past the tolerance (worse), +1 if it shrank (better), 0 if not."""
    if before == now or abs(now - before) <= RELATIVE_TOLERANCE * max(abs(before), 1e-12):
        return 0, None
    shown = f"${before:.4f} → ${now:.4f}" if money else f"{before:.0f} → {now:.0f}"
    change = f" ({(now - before) / before:+.0%})" if before else ""
    return (-1 if now > before else 1), f"{label} {shown}{change}"


def _change(now: ScenarioResult, before: ScenarioResult) -> Change:
    notes: list[str] = []
    score = 0
    if now.pass_rate != before.pass_rate:
        notes.append(f"pass rate {before.pass_rate:.0%} → {now.pass_rate:.0%}")
    for label, field, money in (("tokens", "tokens", False), ("cost", "cost_usd", True)):
        moved, note = _moved(label, now.mean(field), before.mean(field), money)  # type: ignore[arg-type]
        score += moved
        notes += [note] if note else []
    verdict: Verdict
    if now.pass_rate < before.pass_rate:
        verdict = "worse"
    elif now.pass_rate > before.pass_rate:
        verdict = "better"
    else:
        verdict = "worse" if score < 0 else "better" if score > 0 else "same"
    return Change(
        name=now.name,
        verdict=verdict,
        pass_rate=now.pass_rate,
        baseline_pass_rate=before.pass_rate,
        tokens=now.mean("tokens"),
        baseline_tokens=before.mean("tokens"),
        cost_usd=now.mean("cost_usd"),
        baseline_cost_usd=before.mean("cost_usd"),
        notes=notes,
    )


def compare(current: EvalReport, baseline: EvalReport) -> list[Change]:
    """Each scenario against the baseline's scenario of the same name.

    A lower pass rate is worse whatever else moved; with the same pass rate, more
    tokens or cost (beyond a 5% tolerance) is worse and less is better."""
    earlier = {s.name: s for s in baseline.scenarios}
    changes = []
    for scenario in current.scenarios:
        before = earlier.pop(scenario.name, None)
        if before is None:
            changes.append(
                Change(
                    name=scenario.name,
                    verdict="new",
                    pass_rate=scenario.pass_rate,
                    baseline_pass_rate=None,
                    tokens=scenario.mean("tokens"),
                    baseline_tokens=None,
                    cost_usd=scenario.mean("cost_usd"),
                    baseline_cost_usd=None,
                )
            )
        else:
            changes.append(_change(scenario, before))
    for gone in earlier.values():
        changes.append(
            Change(
                name=gone.name,
                verdict="gone",
                pass_rate=None,
                baseline_pass_rate=gone.pass_rate,
                tokens=None,
                baseline_tokens=gone.mean("tokens"),
                cost_usd=None,
                baseline_cost_usd=gone.mean("cost_usd"),
            )
        )
    return changes
