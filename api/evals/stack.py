"""The Keel an eval runs against: a worker and API started for it, on the configured
Temporal and Postgres (or embedded ones), talking to the scripted model server when
the scenarios are scripted and to the configured endpoint when they are not.

An eval starts its own worker on its own task queue, like `keel demo`, because the
scripted model lives in this process: a running `keel dev`'s worker could not reach
it, and workers on a shared task queue would answer with another model.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from keel.activities.llm.prices import ModelPrice
from keel.api.cli.client import KeelClient
from keel.api.cli.connection import keel_api
from keel.api.cli.local_stack import StackInfo
from keel.api.evals.scenario import Scenario, ScenarioError
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import free_port
from keel.worker.scripted.models import ScriptedModelServer

__all__ = ["eval_stack", "scripted_models", "split_by_model"]


def split_by_model(scenarios: list[Scenario]) -> bool:
    """True when every scenario is scripted, False when none is; a mix is refused,
    since one worker talks to one endpoint."""
    scripted = [s.name for s in scenarios if s.scripted]
    if scripted and len(scripted) != len(scenarios):
        configured = [s.name for s in scenarios if not s.scripted]
        raise ScenarioError(
            f"Scenarios {', '.join(scripted)} use a script and {', '.join(configured)} the "
            "configured model; run them in two `keel eval` calls."
        )
    return bool(scripted)


@contextmanager
def scripted_models(
    scenarios: list[Scenario], models: dict[str, str | None]
) -> Iterator[tuple[ScriptedModelServer, dict[str, ModelPrice]]]:
    """A running server with each scenario's script under its model name, and the
    prices the scenarios give those models."""
    scripts = {str(models[s.name]): s.script() for s in scenarios}
    prices = {str(models[s.name]): s.model.price for s in scenarios if s.model.price is not None}
    with ScriptedModelServer(scripts) as server:
        yield server, prices


def _eval_settings(settings: Settings, work_dir: Path) -> Settings:
    """Its own task queue and ports; its embedded parts apart from `keel dev`'s."""
    return settings.model_copy(
        update={
            "data_dir": settings.data_dir.expanduser().resolve() / "evals",
            "workspace_root": work_dir,
            "task_queue": f"keel-eval-{uuid.uuid4().hex[:8]}",
            "api_port": free_port(),
            "temporal_port": free_port(),
            "temporal_ui_port": free_port(),
            "api_url": None,
        }
    )


@asynccontextmanager
async def eval_stack(
    scenarios: list[Scenario],
    models: dict[str, str | None],
    settings: Settings,
    work_dir: Path,
) -> AsyncIterator[tuple[KeelClient, StackInfo]]:
    """A client of a Keel started for these scenarios, until the context exits."""
    settings = _eval_settings(settings, work_dir)
    if not split_by_model(scenarios):
        async with keel_api(KeelClient, settings, reuse_running=False) as started:
            yield started
        return
    with scripted_models(scenarios, models) as (server, prices):
        settings = settings.model_copy(
            update={
                "openai_base_url": server.base_url,
                "prices": {**settings.prices, **prices},
            }
        )
        async with keel_api(KeelClient, settings, reuse_running=False) as started:
            yield started
