"""Provider rate limits every worker shares: the `provider_limits` and `provider_leases`
tables (migration 028).

A call reserves its moment with one atomic statement: the next free moment of the
endpoint (the latest of its request pace, its token pace, a block its provider asked
for, and now) becomes the call's, and the paces move on past it. A reservation further
off than the caller will wait takes nothing. Concurrent calls hold leases that expire
unless renewed, so a worker killed mid-call frees its slot within a lease's life.
"""

from __future__ import annotations

from dataclasses import dataclass

from keel.activities.store.store_pool import PooledStore

__all__ = ["ProviderLimitStore", "Reservation"]

ENSURE_LIMIT_SQL = (
    "INSERT INTO provider_limits (endpoint, key_hash) VALUES (%s, %s) ON CONFLICT DO NOTHING"
)
RESERVE_SQL = (
    "WITH cur AS (SELECT endpoint, key_hash, requests_next_at, tokens_next_at, blocked_until,"
    " greatest(requests_next_at, tokens_next_at, blocked_until, now()) AS slot"
    " FROM provider_limits WHERE endpoint = %(endpoint)s AND key_hash = %(key)s FOR UPDATE)"
    " UPDATE provider_limits p"
    " SET requests_next_at = cur.slot + make_interval(secs => %(request_s)s),"
    " tokens_next_at = cur.slot + make_interval(secs => %(token_s)s)"
    " FROM cur WHERE p.endpoint = cur.endpoint AND p.key_hash = cur.key_hash"
    " AND cur.slot <= now() + make_interval(secs => %(max_wait_s)s)"
    " RETURNING extract(epoch FROM cur.slot - now())::float AS wait_s,"
    " CASE WHEN cur.slot = now() THEN 'none'"
    " WHEN cur.slot = cur.blocked_until THEN 'provider'"
    " WHEN cur.slot = cur.tokens_next_at AND cur.tokens_next_at > cur.requests_next_at"
    " THEN 'tokens' ELSE 'requests' END AS reason"
)
"""The call's moment (seconds from now) and what held it back; no row when it is
further off than `max_wait_s`, and then nothing is reserved."""
NEXT_FREE_SQL = (
    "SELECT extract(epoch FROM greatest(requests_next_at, tokens_next_at, blocked_until, now())"
    " - now())::float AS wait_s FROM provider_limits WHERE endpoint = %s AND key_hash = %s"
)
SPENT_TOKENS_SQL = (
    "UPDATE provider_limits SET tokens_next_at = tokens_next_at + make_interval(secs => %s)"
    " WHERE endpoint = %s AND key_hash = %s"
)
"""A call's usage against what it reserved: the token pace moves on (or back) by the
difference."""
BLOCK_SQL = (
    "UPDATE provider_limits SET blocked_until = greatest(blocked_until,"
    " now() + make_interval(secs => %s)) WHERE endpoint = %s AND key_hash = %s"
)
LOCK_LIMIT_SQL = "SELECT 1 FROM provider_limits WHERE endpoint = %s AND key_hash = %s FOR UPDATE"
DROP_EXPIRED_LEASES_SQL = (
    "DELETE FROM provider_leases WHERE endpoint = %s AND key_hash = %s AND expires_at < now()"
)
TAKE_LEASE_SQL = (
    "INSERT INTO provider_leases (endpoint, key_hash, lease_id, expires_at)"
    " SELECT %(endpoint)s, %(key)s, %(lease)s, now() + make_interval(secs => %(ttl_s)s)"
    " WHERE (SELECT count(*) FROM provider_leases"
    " WHERE endpoint = %(endpoint)s AND key_hash = %(key)s) < %(max)s"
    " ON CONFLICT DO NOTHING RETURNING 1"
)
RENEW_LEASE_SQL = (
    "UPDATE provider_leases SET expires_at = now() + make_interval(secs => %s)"
    " WHERE endpoint = %s AND key_hash = %s AND lease_id = %s"
)
RELEASE_LEASE_SQL = (
    "DELETE FROM provider_leases WHERE endpoint = %s AND key_hash = %s AND lease_id = %s"
)


@dataclass(frozen=True)
class Reservation:
    """A reserved moment: wait `wait_s`, held back by `reason` (or `none`)."""

    wait_s: float
    reason: str


class ProviderLimitStore(PooledStore):
    """The shared state of provider limits, for every worker."""

    async def ensure(self, endpoint: str, key: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(ENSURE_LIMIT_SQL, (endpoint, key))

    async def reserve(
        self, endpoint: str, key: str, *, request_s: float, token_s: float, max_wait_s: float
    ) -> Reservation | None:
        """Reserve the next free moment; None (nothing reserved) when past `max_wait_s`."""
        params = {
            "endpoint": endpoint,
            "key": key,
            "request_s": request_s,
            "token_s": token_s,
            "max_wait_s": max_wait_s,
        }
        async with self._pool.connection() as conn:
            cur = await conn.execute(RESERVE_SQL, params)
            row = await cur.fetchone()
        if row is None:
            return None
        return Reservation(wait_s=max(float(row["wait_s"]), 0.0), reason=str(row["reason"]))

    async def next_free_s(self, endpoint: str, key: str) -> float:
        async with self._pool.connection() as conn:
            cur = await conn.execute(NEXT_FREE_SQL, (endpoint, key))
            row = await cur.fetchone()
        return max(float(row["wait_s"]), 0.0) if row is not None else 0.0

    async def spent_tokens(self, endpoint: str, key: str, seconds: float) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(SPENT_TOKENS_SQL, (seconds, endpoint, key))

    async def block(self, endpoint: str, key: str, seconds: float) -> None:
        """Every worker waits `seconds` (at least) before its next call here."""
        async with self._pool.connection() as conn:
            await conn.execute(BLOCK_SQL, (seconds, endpoint, key))

    async def take_lease(
        self, endpoint: str, key: str, lease_id: str, *, max_leases: int, ttl_s: float
    ) -> bool:
        """Take one of `max_leases` slots for a call in flight; False when all are held."""
        params = {
            "endpoint": endpoint,
            "key": key,
            "lease": lease_id,
            "ttl_s": ttl_s,
            "max": max_leases,
        }
        async with self._pool.connection() as conn, conn.transaction():
            # The limit's row serialises takers: each counts the leases the last one left.
            await conn.execute(LOCK_LIMIT_SQL, (endpoint, key))
            await conn.execute(DROP_EXPIRED_LEASES_SQL, (endpoint, key))
            cur = await conn.execute(TAKE_LEASE_SQL, params)
            return await cur.fetchone() is not None

    async def renew_lease(self, endpoint: str, key: str, lease_id: str, ttl_s: float) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(RENEW_LEASE_SQL, (ttl_s, endpoint, key, lease_id))

    async def release_lease(self, endpoint: str, key: str, lease_id: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(RELEASE_LEASE_SQL, (endpoint, key, lease_id))
