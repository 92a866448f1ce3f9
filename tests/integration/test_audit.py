"""The hash-chained audit log against a real Postgres: appends, tampering, concurrency."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import psycopg.conninfo
import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from keel.activities.store.audit import GENESIS_HASH, AuditEntry, AuditLog, AuditRecord
from keel.activities.store.run_store import Store

Pool = AsyncConnectionPool[psycopg.AsyncConnection[Any]]


async def open_pool(url: str, **kwargs: Any) -> Pool:
    pool: Pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=10,
        open=False,
        kwargs={"autocommit": True, **kwargs},
    )
    await pool.open(wait=True, timeout=20)
    return pool


@pytest.fixture(scope="session")
async def audit_pool(store: Store, database_url: str) -> AsyncIterator[Pool]:
    """A pool of our own on the session database (the `store` fixture migrated it)."""
    pool = await open_pool(database_url)
    yield pool
    await pool.close()


@pytest.fixture
def audit(audit_pool: Pool) -> AuditLog:
    return AuditLog(audit_pool)


@pytest.fixture
def tenant() -> str:
    """A chain of its own per test, so tampering in one test leaves the others intact."""
    return f"tenant-{uuid.uuid4().hex[:8]}"


async def append_chain(audit: AuditLog, tenant: str, n: int) -> list[AuditRecord]:
    return [
        await audit.append(
            AuditEntry(
                tenant_id=tenant,
                actor="alice",
                category="approval",
                action="interaction.approved",
                subject=f"run-{i}",
                detail={"step": i, "payload_hash": f"{i:064x}"},
            )
        )
        for i in range(n)
    ]


async def as_attacker(database_url: str, *statements: tuple[str, tuple[Any, ...]]) -> None:
    """A superuser who switches the append-only trigger off, edits, and switches it back."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        async with conn.transaction():
            await conn.execute("ALTER TABLE audit_log DISABLE TRIGGER ALL")
            for sql, params in statements:
                await conn.execute(sql, params)  # type: ignore[arg-type]
            await conn.execute("ALTER TABLE audit_log ENABLE TRIGGER ALL")


async def test_appended_chain_verifies(audit: AuditLog, audit_pool: Pool, tenant: str) -> None:
    records = await append_chain(audit, tenant, 5)

    assert records[0].prev_hash == GENESIS_HASH
    for before, after in itertools.pairwise(records):
        assert after.prev_hash == before.hash
        assert after.id > before.id
        assert after.created_at >= before.created_at
    result = await audit.verify(tenant)
    assert result.ok, result.message
    assert (result.rows_checked, result.chains_checked) == (5, 1)
    assert result.broken_id is None and result.problem is None

    async with audit_pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute("SELECT * FROM audit_log WHERE id = %s", (records[2].id,))
        stored = await cur.fetchone()
    assert stored is not None
    assert AuditRecord.model_validate(stored) == records[2]


async def test_empty_chain_verifies(audit: AuditLog) -> None:
    result = await audit.verify("nobody-here")
    assert result.ok and result.rows_checked == 0 and result.chains_checked == 0


async def test_detail_is_redacted_and_hashes_as_stored(
    audit: AuditLog, audit_pool: Pool, tenant: str
) -> None:
    detail: dict[str, Any] = {
        "password": "hunter2",
        "headers": {"Authorization": "Bearer abc.def.ghi"},
        "note": "called with sk-abcdefghijklmnopqrstuvwxyz012345",
        "numbers": [1, 1.0, 0.1, 1e300, -0.0, 12345678901234567890],
        "text": "naïve ✓ \u00e9",
        "nested": {"b": [True, False, None], "a": {}},
    }
    record = await audit.append(
        AuditEntry(
            tenant_id=tenant,
            category="admin",
            action="settings.changed",
            severity="warning",
            subject="postgresql://keel:pa55word@db/keel",
            detail=detail,
        )
    )
    assert record.detail["password"] == "[redacted]"
    assert record.detail["headers"] == {"Authorization": "[redacted]"}
    assert record.detail["note"] == "called with [redacted]"
    assert record.subject == "postgresql://keel:[redacted]@db/keel"

    async with audit_pool.connection() as conn:
        cur = await conn.execute("SELECT detail::text FROM audit_log WHERE id = %s", (record.id,))
        row = await cur.fetchone()
    assert row is not None
    assert "hunter2" not in row[0] and "sk-abc" not in row[0]
    assert (await audit.verify(tenant)).ok


async def test_an_entry_with_nul_is_stored_escaped_and_verifies(
    audit: AuditLog, tenant: str
) -> None:
    """Postgres refuses NUL in text and jsonb: an entry quoting a model's NUL still appends."""
    entry = AuditEntry(
        tenant_id=tenant,
        actor="al\0ice",
        category="router",
        action="route.clarifying",
        subject="run-1/\0",
        detail={"reason": "bad\0answer", "nested": [{"k\0": "v\0"}]},
    )
    record = await audit.append(entry)
    assert record.detail == {"reason": "bad\\x00answer", "nested": [{"k\\x00": "v\\x00"}]}
    assert (record.actor, record.subject) == ("al\\x00ice", "run-1/\\x00")
    await audit.append_once(entry)  # found as already appended, not appended twice
    [stored] = await audit.entries(tenant)
    assert stored.detail == record.detail and stored.hash == record.hash
    assert (await audit.verify(tenant)).ok


async def test_verification_does_not_depend_on_the_session_time_zone(
    audit: AuditLog, database_url: str, tenant: str
) -> None:
    await append_chain(audit, tenant, 3)
    pool = await open_pool(database_url, options="-c TimeZone=Pacific/Chatham")
    try:
        result = await AuditLog(pool).verify(tenant)
    finally:
        await pool.close()
    assert result.ok, result.message


async def test_edited_row_is_named(audit: AuditLog, database_url: str, tenant: str) -> None:
    records = await append_chain(audit, tenant, 5)
    await as_attacker(
        database_url,
        (
            "UPDATE audit_log SET actor = 'mallory' WHERE id = %s",
            (records[2].id,),
        ),
    )

    result = await audit.verify(tenant)
    assert not result.ok
    assert (result.broken_id, result.problem) == (records[2].id, "edited")
    assert str(records[2].id) in result.message


async def test_edited_detail_is_named(audit: AuditLog, database_url: str, tenant: str) -> None:
    records = await append_chain(audit, tenant, 3)
    await as_attacker(
        database_url,
        (
            "UPDATE audit_log SET detail = detail || '{\"step\": 99}' WHERE id = %s",
            (records[0].id,),
        ),
    )
    result = await audit.verify(tenant)
    assert (result.ok, result.broken_id, result.problem) == (False, records[0].id, "edited")


async def test_deleted_row_shows_as_a_gap(audit: AuditLog, database_url: str, tenant: str) -> None:
    records = await append_chain(audit, tenant, 5)
    await as_attacker(database_url, ("DELETE FROM audit_log WHERE id = %s", (records[2].id,)))

    result = await audit.verify(tenant)
    assert not result.ok
    assert (result.broken_id, result.problem) == (records[3].id, "deleted")
    assert f"row {records[1].id}" in result.message


async def test_deleted_first_row_shows_as_a_gap(
    audit: AuditLog, database_url: str, tenant: str
) -> None:
    records = await append_chain(audit, tenant, 3)
    await as_attacker(database_url, ("DELETE FROM audit_log WHERE id = %s", (records[0].id,)))

    result = await audit.verify(tenant)
    assert (result.ok, result.broken_id, result.problem) == (False, records[1].id, "deleted")
    assert "start of its chain" in result.message


async def test_swapped_rows_show_as_reordered(
    audit: AuditLog, database_url: str, tenant: str
) -> None:
    records = await append_chain(audit, tenant, 5)
    a, b = records[1].id, records[2].id
    await as_attacker(
        database_url,
        ("UPDATE audit_log SET id = -id WHERE id IN (%s, %s)", (a, b)),
        ("UPDATE audit_log SET id = %s WHERE id = %s", (b, -a)),
        ("UPDATE audit_log SET id = %s WHERE id = %s", (a, -b)),
    )

    result = await audit.verify(tenant)
    assert not result.ok
    assert (result.broken_id, result.problem) == (a, "reordered")


async def test_concurrent_appends_keep_one_chain(audit: AuditLog, tenant: str) -> None:
    other = f"{tenant}-other"

    async def one(i: int) -> AuditRecord:
        return await audit.append(
            AuditEntry(
                tenant_id=tenant if i % 5 else other,
                actor=f"worker-{i}",
                category="run",
                action="tool.executed",
                detail={"i": i},
            )
        )

    records = await asyncio.gather(*(one(i) for i in range(50)))

    for name, count in ((tenant, 40), (other, 10)):
        result = await audit.verify(name)
        assert result.ok, result.message
        assert result.rows_checked == count
        chain = sorted((r for r in records if r.tenant_id == name), key=lambda r: r.id)
        assert len({r.prev_hash for r in chain}) == count  # no fork
        assert chain[0].prev_hash == GENESIS_HASH


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE audit_log SET actor = 'mallory' WHERE id = %s",
        "DELETE FROM audit_log WHERE id = %s",
    ],
)
async def test_database_refuses_update_and_delete(
    audit: AuditLog, database_url: str, tenant: str, sql: str
) -> None:
    [record] = await append_chain(audit, tenant, 1)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            await conn.execute(sql, (record.id,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            await conn.execute("TRUNCATE audit_log")
    assert (await audit.verify(tenant)).ok


# -- every chain at once, on a database of its own -----------------------------


@pytest.fixture
async def fresh_url(admin_url: str) -> AsyncIterator[str]:
    name = f"keel_audit_{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(admin_url, dbname=name)
    store = await Store.open(url)
    await store.migrate()
    await store.close()
    yield url
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_verify_without_tenant_checks_every_chain(fresh_url: str) -> None:
    pool = await open_pool(fresh_url)
    try:
        audit = AuditLog(pool)
        system = await audit.append(
            AuditEntry(category="system", action="worker.started", actor="system")
        )
        assert system.prev_hash == GENESIS_HASH
        first = await append_chain(audit, "acme", 3)
        second = await append_chain(audit, "globex", 2)
        await audit.append(AuditEntry(category="system", action="worker.stopped"))

        result = await audit.verify()
        assert result.ok, result.message
        assert (result.rows_checked, result.chains_checked) == (7, 3)

        await as_attacker(
            fresh_url,
            ("UPDATE audit_log SET subject = 'x' WHERE id = %s", (second[1].id,)),
            ("DELETE FROM audit_log WHERE id = %s", (first[1].id,)),
        )
        result = await audit.verify()
        assert not result.ok
        # The lowest broken id across chains is reported.
        assert (result.broken_id, result.problem) == (first[2].id, "deleted")
        assert (await audit.verify("globex")).problem == "edited"
    finally:
        await pool.close()
