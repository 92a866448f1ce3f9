"""Tool backends called as the user: how Keel gets a user's token for each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from keel.activities.outbound.url_prefix import longest_prefix

# The default lifetime of a cached user token (the gateway Keel grew from used 25 min).
DEFAULT_TTL_S = 25 * 60

Grant = Literal["token_exchange", "refresh_token", "user_token"]


class UserCredentialBackend(BaseModel):
    """One backend (by URL prefix) whose calls carry the run's user's own token."""

    model_config = ConfigDict(extra="forbid")

    grant: Grant = Field(
        description=(
            "`token_exchange`: RFC 8693 at `token_url`, the subject token a short-lived "
            "assertion Keel signs for the run's user; `refresh_token`: a refresh token the "
            "user granted (asked for once, kept sealed) traded at `token_url`; "
            "`user_token`: the user's own bearer (a personal access token), asked for once."
        )
    )
    token_url: str | None = Field(default=None, description="The backend's token endpoint.")
    client_id: str | None = None
    client_secret: SecretStr | None = None
    audience: str | None = Field(
        default=None, description="`audience` of the exchange; default the token endpoint."
    )
    scope: str | None = None
    ttl_s: int = Field(
        default=DEFAULT_TTL_S,
        gt=0,
        description="How long a token is cached, at most; the backend's `expires_in` if shorter.",
    )
    prompt: str | None = Field(
        default=None, description="What the user is asked when Keel needs their credential."
    )

    @model_validator(mode="after")
    def _token_url_when_traded(self) -> UserCredentialBackend:
        if self.grant != "user_token" and not self.token_url:
            raise ValueError(f"a `{self.grant}` backend needs its `token_url`")
        return self


def backend_for(
    url: str, backends: Mapping[str, UserCredentialBackend]
) -> tuple[str, UserCredentialBackend] | None:
    """The backend (its prefix and configuration) that `url` lies under, if any."""
    prefix = longest_prefix(url, backends)
    return (prefix, backends[prefix]) if prefix is not None else None
