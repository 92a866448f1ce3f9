"""Model calls wait their turn under a provider's limits, kept in Postgres for every worker.

`ProviderLimiter.call(endpoint, key, tokens)` is an async context: on entry it takes a
concurrency lease (when the limit has one) and reserves the call's moment, then sleeps
until it comes, heartbeating, inside the call's activity; on exit it releases the lease,
moves the token pace by what the call really used, and passes on what the provider's
answer said about its limits (`permit.saw`), so every worker waits after one's 429.

Why the wait is here and not a durable timer in the workflow: a reservation is good for
the moment it names, and a worker that sleeps on it makes the call itself, while a
workflow timer would need a second reservation after it fired; the wait needs no new
workflow commands, so recorded histories replay unchanged; the activity heartbeats, so a
dead worker's call is retried elsewhere in seconds. A wait longer than `MAX_WAIT_S`
reserves nothing and fails the attempt with a retry after that long, so no attempt
outlives its start-to-close timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import timedelta

from temporalio.exceptions import ApplicationError

from keel.activities.heartbeats import with_heartbeats
from keel.activities.llm.limits.config import ProviderLimit, endpoint_of, key_hash
from keel.activities.llm.limits.headers import blocked_for
from keel.activities.store.provider_limit_store import ProviderLimitStore
from keel.workflows.error_types import LLM_UNAVAILABLE

__all__ = ["MAX_WAIT_S", "CallPermit", "OnWait", "ProviderLimiter"]

MAX_WAIT_S = 240.0
"""The longest one attempt waits its turn: well inside a model call's 10-minute attempt."""
LEASE_TTL_S = 30.0
"""A lease not renewed for this long is free again: a killed worker's slot comes back."""
LEASE_RENEW_S = 10.0
LEASE_POLL_S = (0.05, 1.0)
"""First and longest pause between tries for a concurrency slot."""

log = logging.getLogger("keel.llm.limits")

OnWait = Callable[[float, str], Awaitable[None]]
"""Told once an attempt must wait, and why: `requests`, `tokens` or `provider` with the
seconds it is about to wait; `concurrency` with the seconds a slot took, once taken."""


class CallPermit:
    """One admitted call: what it reserved, and what the provider's answer said."""

    def __init__(self, tokens: int = 0) -> None:
        self.reserved_tokens = tokens
        self.used_tokens: int | None = None
        self.waited_s = 0.0
        self.block_s = 0.0

    def saw(self, status: int, headers: Mapping[str, str]) -> None:
        """The provider's answer: a 429's retry-after, a remaining count of 0."""
        self.block_s = max(self.block_s, blocked_for(status, headers))

    def used(self, tokens: int) -> None:
        self.used_tokens = tokens


class _EndpointLimit:
    """One configured limit, for one endpoint and key."""

    def __init__(self, store: ProviderLimitStore, limit: ProviderLimit, endpoint: str, key: str):
        self._store = store
        self.limit = limit
        self.endpoint = endpoint
        self.key = key
        self._ready = False

    async def admit(self, tokens: int, permit: CallPermit, lease: str, on_wait: OnWait) -> None:
        if not self._ready:
            await self._store.ensure(self.endpoint, self.key)
            self._ready = True
        started = time.monotonic()
        told = False
        if self.limit.concurrent is not None:
            pause = LEASE_POLL_S[0]
            while not await self._store.take_lease(
                self.endpoint, self.key, lease, max_leases=self.limit.concurrent, ttl_s=LEASE_TTL_S
            ):
                if time.monotonic() - started + pause > MAX_WAIT_S:
                    raise _wait_longer(self.endpoint, "calls in flight", LEASE_TTL_S)
                await asyncio.sleep(pause)
                pause = min(pause * 2, LEASE_POLL_S[1])
                told = True
            if told:  # how long a slot took is known once it is taken
                await on_wait(time.monotonic() - started, "concurrency")
        left = MAX_WAIT_S - (time.monotonic() - started)
        reservation = await self._store.reserve(
            self.endpoint,
            self.key,
            request_s=self.limit.request_interval_s,
            token_s=self.limit.token_interval_s * tokens,
            max_wait_s=max(left, 0.0),
        )
        if reservation is None:
            free = await self._store.next_free_s(self.endpoint, self.key)
            raise _wait_longer(self.endpoint, "its pace", free)
        if reservation.wait_s > 0:
            if not told:
                await on_wait(reservation.wait_s, reservation.reason)
            await asyncio.sleep(reservation.wait_s)
        permit.waited_s = time.monotonic() - started

    async def renew(self, lease: str) -> None:
        await self._store.renew_lease(self.endpoint, self.key, lease, LEASE_TTL_S)

    async def settle(self, permit: CallPermit, lease: str) -> None:
        if self.limit.concurrent is not None:
            await self._store.release_lease(self.endpoint, self.key, lease)
        if permit.used_tokens is not None and self.limit.tokens is not None:
            spent = (permit.used_tokens - permit.reserved_tokens) * self.limit.token_interval_s
            if spent:
                await self._store.spent_tokens(self.endpoint, self.key, spent)
        if permit.block_s > 0:
            await self._store.block(self.endpoint, self.key, permit.block_s)


class ProviderLimiter:
    """The configured limits, matched to the endpoints and keys calls go to."""

    def __init__(self, store: ProviderLimitStore | None, limits: Sequence[ProviderLimit]) -> None:
        if limits and store is None:
            raise ValueError("Provider limits need the store their state is kept in.")
        self._store = store
        self._limits = tuple(limits)
        self._found: dict[tuple[str, str], _EndpointLimit | None] = {}

    @classmethod
    def none(cls) -> ProviderLimiter:
        """No limits: every call goes at once, and nothing is read or written."""
        return cls(None, ())

    def _limit(self, base_url: str, api_key: str | None) -> _EndpointLimit | None:
        found_key = (base_url, api_key or "")
        if found_key not in self._found:
            assert self._store is not None
            limit = next((x for x in self._limits if x.covers(base_url, api_key)), None)
            self._found[found_key] = (
                None
                if limit is None
                else _EndpointLimit(self._store, limit, endpoint_of(base_url), key_hash(api_key))
            )
        return self._found[found_key]

    def limits(self, base_url: str | None, api_key: str | None) -> bool:
        """Whether calls to this endpoint with this key wait their turn."""
        if not self._limits or base_url is None:
            return False
        return self._limit(base_url, api_key) is not None

    @contextlib.asynccontextmanager
    async def call(
        self,
        base_url: str | None,
        api_key: str | None,
        tokens: Callable[[], int],
        on_wait: OnWait,
    ) -> AsyncIterator[CallPermit]:
        """Admit one call (waiting its turn), and settle what it used when it is done."""
        limit = self._limit(base_url, api_key) if self._limits and base_url else None
        if limit is None:
            yield CallPermit()
            return
        permit = CallPermit(tokens() if limit.limit.tokens is not None else 0)
        lease = uuid.uuid4().hex
        renewal: asyncio.Task[None] | None = None
        try:
            await with_heartbeats(limit.admit(permit.reserved_tokens, permit, lease, on_wait))
            if limit.limit.concurrent is not None:
                renewal = asyncio.create_task(self._renew(limit, lease))
            yield permit
        finally:
            if renewal is not None:
                renewal.cancel()
            await self._settle(limit, permit, lease)

    async def _renew(self, limit: _EndpointLimit, lease: str) -> None:
        while True:
            await asyncio.sleep(LEASE_RENEW_S)
            with contextlib.suppress(Exception):  # missed renewals only shorten the lease
                await limit.renew(lease)

    async def _settle(self, limit: _EndpointLimit, permit: CallPermit, lease: str) -> None:
        """Best effort: the call has happened; a lost update costs a little pace at most."""
        try:
            await limit.settle(permit, lease)
        except Exception as exc:
            log.warning("provider limit of %s: cannot record the call: %s", limit.endpoint, exc)


def _wait_longer(endpoint: str, what: str, seconds: float) -> ApplicationError:
    return ApplicationError(
        f"The rate limit of {endpoint} ({what}) has no turn for this call within "
        f"{MAX_WAIT_S:.0f} s; it is tried again in {seconds:.0f} s.",
        type=LLM_UNAVAILABLE,
        next_retry_delay=timedelta(seconds=max(seconds, 1.0)),
    )
