"""Health, liveness and readiness answers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    temporal: str
    database: Literal["ok", "unavailable"]


class Liveness(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    """Whether this API can serve: both of its dependencies answer."""

    status: Literal["ready", "unready"]
    temporal: Literal["ok", "unreachable", "misconfigured"]
    """`misconfigured`: Temporal answers, but the namespace or Keel's search attributes are
    missing (`problems` says which, and what to run)."""
    database: Literal["ok", "unreachable"]
    problems: list[str] | None = None
