"""The settings of identity at the boundary: the token exchange and refusal auditing.

A part of `Settings` (which inherits them), kept in a room of its own; see
docs/identity.md.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from keel.worker.config.identity_providers import IdentityProvider

__all__ = ["IdentitySettings"]


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class IdentitySettings(BaseSettings):
    """Who may sign in through the exchange, for how long, and how refusals are audited."""

    model_config = SettingsConfigDict(extra="ignore")

    identity_providers: list[IdentityProvider] = Field(
        default_factory=list,
        validation_alias=_env("KEEL_IDENTITY_PROVIDERS"),
        description="JSON list of identity providers POST /v1/auth/exchange accepts.",
    )
    exchange_ttl_s: int = Field(
        default=900,
        ge=60,
        le=86_400,
        validation_alias=_env("KEEL_EXCHANGE_TTL_S"),
        description="How long a token issued by the exchange lasts, in seconds.",
    )
    exchange_secret: SecretStr | None = Field(
        default=None,
        validation_alias=_env("KEEL_EXCHANGE_SECRET"),
        description=(
            "Secret the key of exchanged tokens derives from; unset: the JWT secret, else a "
            "file in the data directory. Give every API replica the same value."
        ),
    )
    audit_refusals_per_window: int = Field(
        default=30,
        ge=1,
        le=10_000,
        validation_alias=_env("KEEL_AUDIT_REFUSALS_PER_WINDOW"),
        description="Refusals audited in full per source and reason in a window.",
    )
    audit_refusal_window_s: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        validation_alias=_env("KEEL_AUDIT_REFUSAL_WINDOW_S"),
        description="The window, in seconds; the rest of a window's refusals are one count.",
    )
