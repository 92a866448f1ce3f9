"""The distribution owns one top-level name: `keel`.

Plugins are installed into Keel's own environment, so a generic top-level package of
Keel's (`api`, `worker`, …) would break a plugin of that name, or be broken by it. These
tests build the real wheel, install it into an empty directory, and install a plugin
whose package is called `api` beside it.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.plugin_dists import write_dist

ROOT = Path(__file__).parents[2]

API_PLUGIN = '''
"""A plugin that happens to own the top-level name `api`."""
from pydantic import BaseModel, ConfigDict

from keel.worker.plugins import Plugin, PluginTool, ToolContext

WHO = "the plugin's api"


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def shout(args: Args, context: ToolContext) -> str:
    return WHO


plugin = Plugin(
    manifest={"name": "api", "version": "1.0.0", "kinds": ["tool"], "platforms": ["any"]},
    tools=[PluginTool(name="shout", description="Says who it is.", args_model=Args,
                      risk="read", run=shout)],
)
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("keel-*.whl")
    return path


def test_the_wheel_holds_only_keel_and_its_dist_info(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert {t for t in tops if not t.endswith(".dist-info")} == {"keel"}
    # The data files travel with it: migrations, agents, the console's assets.
    assert any(n.startswith("keel/activities/store/migrations/") for n in names)
    assert any(n.startswith("keel/worker/agents/") and n.endswith(".md") for n in names)
    assert "keel/api/console/assets/app.js" in names


def test_a_plugin_named_api_installs_beside_keel_and_both_work(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")} <= {
        "keel",
        "bin",
    }
    (site / "api").mkdir()
    (site / "api" / "__init__.py").write_text(API_PLUGIN)
    write_dist(site, "api-plugin", "1.0.0", {"api": "api:plugin"})

    # Outside the checkout, with the installed wheel first: the checkout's own
    # folders are not importable from there.
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = subprocess.run(
        [sys.executable, "-c", "import api, keel; print(api.WHO); print(keel.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    who, keel_file = probe.stdout.splitlines()
    assert who == "the plugin's api"
    assert Path(keel_file).is_relative_to(site)

    listed = subprocess.run(
        [sys.executable, "-m", "keel.api.cli.main", "plugins", "list", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = {r["name"]: r for r in map(json.loads, listed.stdout.splitlines())}
    assert rows["api"]["status"] == "loaded" and rows["api"]["tools"] == ["shout"]
    assert rows["github"]["status"] == "loaded"  # Keel's own plugin, from the wheel


LAYERS = ("workflows", "activities", "worker", "api")
# Calls that name a package or module by a string: it must be one of Keel's own names.
NAMING_CALLS = {"files", "import_module", "find_spec"}


def test_packages_named_by_string_are_named_under_keel() -> None:
    """`resources.files("api")` works in a checkout (its root is on sys.path) and fails
    once installed, where only `keel` exists; so does `python -m api.…`."""
    wrong = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            if "sample_project" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                first = node.args[0]
                if (
                    name in NAMING_CALLS
                    and isinstance(first, ast.Constant)
                    and isinstance(first.value, str)
                    and first.value.split(".")[0] in LAYERS
                ):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} {first.value!r}")
    assert not wrong, "name these under keel.:\n" + "\n".join(wrong)
