"""Keel plugins: Python packages that add tools, hooks, agents and model providers to Keel.

A plugin package names a `Plugin` in the `keel.plugins` entry-point group::

    [project.entry-points."keel.plugins"]
    acme = "keel_acme:plugin"

Everything a plugin author needs is importable from here. See docs/plugins.md.
"""

from keel.activities.llm.provider_api import (
    ModelContextTooLong,
    ModelProviderError,
    ModelReply,
    ModelRequest,
    ModelToolCall,
    PluginProvider,
)
from keel.activities.plugin_api import (
    AfterDecision,
    BeforeDecision,
    PluginHook,
    PluginTool,
    RunEndView,
    ToolCallView,
    ToolContext,
    ToolOutputView,
)
from keel.worker.plugins.manifest import PluginManifest
from keel.worker.plugins.registry import ENTRY_POINT_GROUP, Plugin, PluginRegistry, PluginReport

__all__ = [
    "ENTRY_POINT_GROUP",
    "AfterDecision",
    "BeforeDecision",
    "ModelContextTooLong",
    "ModelProviderError",
    "ModelReply",
    "ModelRequest",
    "ModelToolCall",
    "Plugin",
    "PluginHook",
    "PluginManifest",
    "PluginProvider",
    "PluginRegistry",
    "PluginReport",
    "PluginTool",
    "RunEndView",
    "ToolCallView",
    "ToolContext",
    "ToolOutputView",
]
