"""The shared state of provider limits in Postgres, as two workers' limiters see it: each
limiter here has its own memory, like a worker of its own; they share only the tables."""

from __future__ import annotations

import asyncio
import time
import uuid

from keel.activities.llm.limits import ProviderLimit, ProviderLimiter, endpoint_of, key_hash
from keel.activities.store.provider_limit_store import ProviderLimitStore
from keel.activities.store.run_store import Store


def endpoint() -> str:
    return f"http://limits-{uuid.uuid4().hex[:8]}.test/v1"


class Waits:
    """What a limiter told its caller about waiting."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str]] = []

    async def __call__(self, wait_s: float, reason: str) -> None:
        self.seen.append((wait_s, reason))


def limiters(store: Store, limit: ProviderLimit) -> tuple[ProviderLimiter, ProviderLimiter]:
    return (
        ProviderLimiter(ProviderLimitStore(store.pool), [limit]),
        ProviderLimiter(ProviderLimitStore(store.pool), [limit]),
    )


async def test_one_slot_of_concurrency_is_one_call_at_a_time_across_workers(store: Store) -> None:
    url = endpoint()
    first, second = limiters(store, ProviderLimit(base_url=url, concurrent=1))
    waits = Waits()
    inside = asyncio.Event()
    order: list[str] = []

    async def holder() -> None:
        async with first.call(url, "sk-1", lambda: 0, Waits()):
            inside.set()
            await asyncio.sleep(0.4)
            order.append("first done")

    async def waiter() -> None:
        await inside.wait()
        async with second.call(url, "sk-1", lambda: 0, waits):
            order.append("second in")

    await asyncio.gather(holder(), waiter())
    assert order == ["first done", "second in"]
    assert [reason for _, reason in waits.seen] == ["concurrency"]
    # Another key of the same endpoint has slots of its own.
    async with second.call(url, "sk-2", lambda: 0, (other := Waits())):
        pass
    assert other.seen == []


async def test_a_dead_workers_lease_expires_and_frees_its_slot(store: Store) -> None:
    url = endpoint()
    limit = ProviderLimit(base_url=url, concurrent=1)
    rows = ProviderLimitStore(store.pool)
    key = key_hash("sk-1")
    await rows.ensure(endpoint_of(url), key)
    # A worker took the slot and was killed: its lease is never renewed nor released.
    assert await rows.take_lease(endpoint_of(url), key, "dead", max_leases=1, ttl_s=0.5)
    assert not await rows.take_lease(endpoint_of(url), key, "other", max_leases=1, ttl_s=30)
    started = time.monotonic()
    limiter = ProviderLimiter(rows, [limit])
    async with limiter.call(url, "sk-1", lambda: 0, Waits()):
        waited = time.monotonic() - started
    assert 0.2 < waited < 1.9, waited


async def test_a_429_one_worker_saw_holds_the_other_back(store: Store) -> None:
    url = endpoint()
    first, second = limiters(store, ProviderLimit(base_url=url, requests=1000))
    async with first.call(url, "sk-1", lambda: 0, Waits()) as permit:
        permit.saw(429, {"retry-after-ms": "700"})
    waits = Waits()
    started = time.monotonic()
    async with second.call(url, "sk-1", lambda: 0, waits):
        waited = time.monotonic() - started
    assert waits.seen and waits.seen[0][1] == "provider"
    assert 0.5 < waited < 1.5, waited


async def test_calls_are_paced_by_tokens_and_the_pace_moves_by_what_they_used(
    store: Store,
) -> None:
    url = endpoint()
    # 1000 tokens a second: a call estimated at 300 holds the next back about 0.3 s.
    first, second = limiters(store, ProviderLimit(base_url=url, tokens=1000, window_s=1))
    async with first.call(url, None, lambda: 300, Waits()) as permit:
        permit.used(300)
    waits = Waits()
    async with second.call(url, None, lambda: 10, waits) as permit:
        permit.used(10)
    assert [reason for _, reason in waits.seen] == ["tokens"]
    assert 0.2 < waits.seen[0][0] < 0.45, waits.seen


async def test_no_configured_limit_reads_and_writes_nothing(store: Store) -> None:
    limiter = ProviderLimiter(ProviderLimitStore(store.pool), [])
    url = endpoint()
    async with limiter.call(url, "sk-1", lambda: 1 / 0, Waits()) as permit:
        permit.saw(429, {"retry-after": "5"})
    assert not limiter.limits(url, "sk-1")
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) AS n FROM provider_limits WHERE endpoint = %s", (endpoint_of(url),)
        )
        row = await cur.fetchone()
    assert row is not None and row["n"] == 0
