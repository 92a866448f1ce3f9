"""Install plugin packages for a test: real distributions that `importlib.metadata` finds.

A distribution here is a directory on `sys.path` holding the package and a
`NAME-VERSION.dist-info` with its `METADATA` and `entry_points.txt`, which is what pip
leaves behind; so Keel discovers the plugin exactly as it would an installed one, with
no build step (and no `wheel` package) needed. Leaving the context takes it away again,
so other tests never see it.
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXAMPLE_PLUGIN = Path(__file__).parents[1] / "examples" / "plugins" / "keel-example-plugin"


def write_dist(target: Path, name: str, version: str, entry_points: dict[str, str]) -> None:
    """The `.dist-info` of distribution `name` with `keel.plugins` entry points."""
    info = target / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[keel.plugins]\n{lines}")


def install_project(project: Path, target: Path) -> list[str]:
    """Install a plugin project (its pyproject's packages and entry points) into `target`.

    Returns the top-level package names, to forget them afterwards."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    packages = [p.name for p in project.iterdir() if (p / "__init__.py").is_file()]
    for package in packages:
        shutil.copytree(project / package, target / package)
    write_dist(target, meta["name"], meta["version"], dict(meta["entry-points"]["keel.plugins"]))
    return packages


def install_module(
    target: Path, name: str, module: str, source: str, entry_points: dict[str, str]
) -> list[str]:
    """Install a one-module plugin distribution written by the test."""
    (target / f"{module}.py").write_text(source)
    write_dist(target, name, "1.0.0", entry_points)
    return [module]


@contextmanager
def on_path(target: Path, modules: list[str]) -> Iterator[Path]:
    """`target` on `sys.path` for the duration; its modules forgotten afterwards."""
    sys.path.insert(0, str(target))
    try:
        yield target
    finally:
        sys.path.remove(str(target))
        for name in list(sys.modules):
            if name.split(".")[0] in modules:
                del sys.modules[name]


@contextmanager
def example_and(tmp_path: Path, plugins: dict[str, tuple[str, str]]) -> Iterator[Path]:
    """The example plugin and one-module plugins (`{name: (module, source)}`, each with the
    entry point `name = module:plugin`), installed in `tmp_path/site` for the duration."""
    site = tmp_path / "site"
    site.mkdir()
    modules = install_project(EXAMPLE_PLUGIN, site)
    for name, (module, source) in plugins.items():
        modules += install_module(site, name, module, source, {name: f"{module}:plugin"})
    with on_path(site, modules):
        yield site
