"""Keel plugins: Python packages that add tools, hooks and agents to Keel.

A plugin package names a `Plugin` in the `keel.plugins` entry-point group::

    [project.entry-points."keel.plugins"]
    acme = "keel_acme:plugin"

Everything a plugin author needs is importable from here. See docs/plugins.md.
"""

from activities.plugin_api import (
    AfterDecision,
    BeforeDecision,
    PluginHook,
    PluginTool,
    RunEndView,
    ToolCallView,
    ToolContext,
    ToolOutputView,
)
from worker.plugins.manifest import PluginManifest
from worker.plugins.registry import ENTRY_POINT_GROUP, Plugin, PluginRegistry, PluginReport

__all__ = [
    "ENTRY_POINT_GROUP",
    "AfterDecision",
    "BeforeDecision",
    "Plugin",
    "PluginHook",
    "PluginManifest",
    "PluginRegistry",
    "PluginReport",
    "PluginTool",
    "RunEndView",
    "ToolCallView",
    "ToolContext",
    "ToolOutputView",
]
