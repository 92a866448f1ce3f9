"""Heartbeats while a long activity's work runs, so a dead worker is noticed in seconds.

A regular activity with a heartbeat timeout is retried elsewhere soon after its worker
dies, instead of at its start-to-close timeout; a local activity lives inside a workflow
task and has no heartbeat. When the activity is cancelled or times out, the work is
cancelled too (a model request or a tool's call stops with it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

__all__ = ["HEARTBEAT_EVERY_S", "with_heartbeats"]

T = TypeVar("T")
HEARTBEAT_EVERY_S = 2.0


async def with_heartbeats(work: Awaitable[T], every_s: float = HEARTBEAT_EVERY_S) -> T:
    """`work`'s result, heartbeating every `every_s` seconds until it comes."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every_s)
            if done:
                return task.result()
            if not activity.info().is_local:
                activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()
