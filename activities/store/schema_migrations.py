"""Keel's schema: the numbered SQL files of `migrations/`, applied once each."""

from __future__ import annotations

from importlib import resources

from keel.activities.store.store_pool import PooledStore

# Any fixed number works; it serialises concurrent migrators (API and worker).
MIGRATION_LOCK_ID = 7_411_203
LOCK_MIGRATIONS_SQL = "SELECT pg_advisory_xact_lock(%s)"
CREATE_MIGRATIONS_TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version integer PRIMARY KEY, name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())"
)
APPLIED_MIGRATIONS_SQL = "SELECT version FROM schema_migrations"
RECORD_MIGRATION_SQL = "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)"


class SchemaMigrations(PooledStore):
    """Applies the migrations not yet applied, one migrator at a time."""

    async def migrate(self) -> list[str]:
        """Apply numbered SQL files not yet applied; returns the names applied."""
        files = sorted(
            (
                f
                for f in resources.files("keel.activities.store.migrations").iterdir()
                if f.name.endswith(".sql")
            ),
            key=lambda f: f.name,
        )
        numbers = [int(f.name.split("_", 1)[0]) for f in files]
        doubled = sorted({n for n in numbers if numbers.count(n) > 1})
        if doubled:
            # Two branches that each added "the next" migration: renumber one of them.
            raise RuntimeError(
                f"Migrations share a number: {', '.join(f'{n:03d}' for n in doubled)}; "
                "give each SQL file in activities/store/migrations its own number."
            )
        applied: list[str] = []
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(LOCK_MIGRATIONS_SQL, (MIGRATION_LOCK_ID,))
            await conn.execute(CREATE_MIGRATIONS_TABLE_SQL)
            cur = await conn.execute(APPLIED_MIGRATIONS_SQL)
            done = {row["version"] for row in await cur.fetchall()}
            for file in files:
                version = int(file.name.split("_", 1)[0])
                if version in done:
                    continue
                await conn.execute(file.read_text())  # type: ignore[arg-type]
                await conn.execute(RECORD_MIGRATION_SQL, (version, file.name))
                applied.append(file.name)
        return applied
