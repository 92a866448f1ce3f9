"""A plugin's manifest: who it is, what it provides, where it runs. Validated at load."""

from __future__ import annotations

import sys
from typing import Literal

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator

PluginKind = Literal["tool", "hook", "agents", "provider"]
Platform = Literal["any", "linux", "darwin", "win32"]


class PluginManifest(BaseModel):
    """What a plugin says about itself; an unknown field is a mistake, so it is refused."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,39}$", description="Unique among plugins.")
    version: str = Field(description="A PEP 440 version, e.g. `1.2.0`.")
    kinds: list[PluginKind] = Field(min_length=1, description="What the plugin provides.")
    platforms: list[Platform] = Field(
        default_factory=lambda: list[Platform](["any"]),
        min_length=1,
        description="`sys.platform`s it runs on.",
    )
    description: str = ""

    @field_validator("version")
    @classmethod
    def _pep440(cls, version: str) -> str:
        try:
            Version(version)
        except InvalidVersion:
            raise ValueError(f"{version!r} is not a PEP 440 version (e.g. 1.0.0)") from None
        return version

    @field_validator("kinds")
    @classmethod
    def _distinct(cls, kinds: list[PluginKind]) -> list[PluginKind]:
        if len(set(kinds)) != len(kinds):
            raise ValueError("each kind may be listed once")
        return kinds

    def runs_here(self, platform: str = sys.platform) -> bool:
        return "any" in self.platforms or any(platform.startswith(p) for p in self.platforms)
