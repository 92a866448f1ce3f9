"""Every package Keel's code or tests import is declared in pyproject.toml.

A package that arrives only because another one depends on it disappears when that one
changes its dependencies. The code under `keel`'s layers may import what the runtime
dependencies or a feature's extra (`otel`) declare; the tests may also import what `dev`
declares; `bench/` what `bench` declares. Imports are read from the source with `ast`
(in functions and `try` blocks too) and mapped to the installed distribution that ships
the module; a module nobody installed is reported, except in `bench/`, whose extra the
test environment does not install.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterable, Iterator
from functools import cache
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LAYERS = ("workflows", "activities", "worker", "api")
"""Installed as keel.workflows and so on (keel/ links them)."""
FIRST_PARTY = {*LAYERS, "keel", "tests", "bench"}
SKIPPED_DIRS = {"sample_project", "__pycache__"}
"""The sample project is a user's code that Keel reviews, not Keel's."""


def declared(*extras: str) -> set[str]:
    """The canonical names the runtime dependencies and these extras declare, with what
    a declared package's own extras bring (`psycopg[pool]`: psycopg-pool)."""
    names: set[str] = set()
    pending = [*PROJECT["dependencies"]]
    seen: set[str] = set()
    for extra in extras:
        pending += PROJECT["optional-dependencies"][extra]
    while pending:
        req = Requirement(pending.pop())
        name = canonicalize_name(req.name)
        if name == canonicalize_name(PROJECT["name"]):
            for extra in req.extras - seen:  # keel[otel] in dev
                seen.add(extra)
                pending += PROJECT["optional-dependencies"][extra]
            continue
        names.add(name)
        if req.extras:
            names |= brought_by_extras(req.name, req.extras)
    return names


def brought_by_extras(dist: str, extras: set[str]) -> set[str]:
    try:
        requires = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return set()
    brought: set[str] = set()
    for line in requires:
        req = Requirement(line)
        if req.marker and any(req.marker.evaluate({"extra": extra}) for extra in extras):
            brought.add(canonicalize_name(req.name))
    return brought


def sources(*folders: str) -> Iterator[Path]:
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if not SKIPPED_DIRS & set(path.relative_to(ROOT).parts):
                yield path


def imported(tree: ast.Module) -> Iterator[str]:
    """The absolute modules a file imports (for `from a import b`: `a.b`, which may be a
    name in `a`; the distribution found is the one shipping the longest prefix)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


@cache
def shipped_paths() -> dict[str, set[str]]:
    """For each installed distribution, the module paths its files provide ("a/b/c")."""
    paths: dict[str, set[str]] = {}
    for dist in metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        own = paths.setdefault(name, set())
        for file in dist.files or ():
            parts = file.parts
            if parts and parts[-1].endswith(".py"):
                parts = (*parts[:-1], parts[-1][:-3])
            for depth in range(1, len(parts) + 1):
                own.add("/".join(parts[:depth]))
    return paths


def distributions_of(module: str) -> set[str]:
    """The distributions that ship the longest importable prefix of `module`."""
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        prefix = "/".join(parts[:depth])
        found = {name for name, paths in shipped_paths().items() if prefix in paths}
        if found:
            return found
    return set()


def written_names(tree: ast.Module) -> set[str]:
    """String constants of a file: the modules a test writes itself (a plugin it builds)."""
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is str}


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def undeclared(paths: Iterable[Path], allowed: set[str], *, known: bool) -> list[str]:
    """One line per distribution imported but not allowed, naming the files; with `known`
    also the modules no installed distribution ships."""
    missing: dict[str, set[str]] = {}
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        for module in set(imported(tree)):
            top = module.split(".")[0]
            if top in FIRST_PARTY or top in sys.stdlib_module_names or top == "__future__":
                continue
            dists = distributions_of(module)
            if not dists and known and top not in written_names(tree):
                missing.setdefault(f"{top} (installed by no distribution)", set()).add(shown(path))
            elif dists and not dists & allowed:
                missing.setdefault(" or ".join(sorted(dists)), set()).add(shown(path))
    return [
        f"{name} is imported but not declared, by {', '.join(sorted(files))}"
        for name, files in sorted(missing.items())
    ]


def test_the_code_imports_only_runtime_dependencies_or_its_feature_extras() -> None:
    problems = undeclared(sources(*LAYERS), declared("otel"), known=True)
    assert problems == [], "\n".join(problems)


def test_the_tests_import_only_what_dev_declares() -> None:
    problems = undeclared(sources("tests"), declared("dev"), known=True)
    assert problems == [], "\n".join(problems)


def test_the_benchmarks_import_only_what_bench_or_dev_declares() -> None:
    problems = undeclared(sources("bench"), declared("bench", "dev"), known=False)
    assert problems == [], "\n".join(problems)


def test_a_package_that_only_comes_through_another_is_reported(tmp_path: Path) -> None:
    code = tmp_path / "uses.py"
    code.write_text(
        "import json\n"
        "from opentelemetry.proto.common.v1 import common_pb2\n"
        "def later():\n    import anyio\n    from psycopg_pool import AsyncConnectionPool\n"
        "import keel_no_such_module\n"
    )
    # Without them declared, each is named; psycopg-pool comes with psycopg[pool].
    allowed = declared("dev") - {"anyio", "opentelemetry-proto"}
    assert undeclared([code], allowed, known=True) == [
        f"anyio is imported but not declared, by {code}",
        f"keel_no_such_module (installed by no distribution) is imported but not declared, "
        f"by {code}",
        f"opentelemetry-proto is imported but not declared, by {code}",
    ]
    assert undeclared([code], declared("dev"), known=False) == []
