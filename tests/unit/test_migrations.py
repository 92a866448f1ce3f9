"""The numbered migrations: one file a number, applied in order."""

from __future__ import annotations

from importlib import resources


def test_every_migration_has_its_own_number() -> None:
    names = [
        f.name
        for f in resources.files("keel.activities.store.migrations").iterdir()
        if f.name.endswith(".sql")
    ]
    numbers = [int(name.split("_", 1)[0]) for name in names]
    assert len(numbers) == len(set(numbers)), sorted(names)
    assert sorted(numbers) == list(range(1, len(numbers) + 1)), sorted(names)
