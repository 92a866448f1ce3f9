"""Eval results as clients post and read them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from keel.api.core.schemas.common import ChosenId
from keel.api.evals.results import EvalReport


class EvalResultCreate(BaseModel):
    """Record what one `keel eval` found (its results file), under an id it chose."""

    model_config = ConfigDict(extra="forbid")

    id: ChosenId = Field(description="Sending the same id and report again records nothing new.")
    report: EvalReport


class EvalResultSummary(BaseModel):
    """An eval result as the list shows it."""

    id: str
    requester: str
    recorded_at: datetime
    started_at: datetime
    finished_at: datetime
    repeat: int = Field(description="Runs per scenario.")
    scenarios: int
    passed: int = Field(description="Scenarios whose pass rate reached the eval's minimum.")


class EvalResultPublic(EvalResultSummary):
    """An eval result with every scenario and attempt."""

    report: EvalReport
