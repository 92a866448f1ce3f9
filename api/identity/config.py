"""Who is calling: the auth configuration, the local secret, and the CLI's own token."""

from __future__ import annotations

import logging

from pydantic import SecretStr

from keel.api.identity.auth import AuthConfig, Principal, TokenVerifier, dev_token
from keel.worker.config.local_secrets import local_secret
from keel.worker.config.settings import Settings

log = logging.getLogger("keel.auth")

EXCHANGE_SECRET_FILE = "exchange-secret"

LOCAL_TENANT = "default"
LOCAL_SUBJECT = "local"


def user_ref(principal: Principal) -> str:
    """How runs and interactions name a person: `user:ID`."""
    return f"user:{principal.subject}"


def auth_config(settings: Settings) -> AuthConfig:
    if settings.auth_mode == "off":
        return AuthConfig(mode="off")
    secret = settings.jwt_secret
    if secret is None and settings.jwks_url is None:
        secret = local_secret(settings.data_dir)
    return AuthConfig(
        mode="jwt",
        hs256_secret=secret,
        jwks_url=settings.jwks_url,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        issued_secret=_exchange_secret(settings, secret),
    )


def _exchange_secret(settings: Settings, jwt_secret: SecretStr | None) -> SecretStr | None:
    """What exchanged tokens' key derives from: KEEL_EXCHANGE_SECRET, else the JWT secret,
    else (with providers configured) a file in the data directory."""
    if settings.exchange_secret is not None:
        return settings.exchange_secret
    if jwt_secret is not None:
        return jwt_secret
    if settings.identity_providers:
        return local_secret(settings.data_dir, EXCHANGE_SECRET_FILE)
    return None


def build_verifier(config: AuthConfig) -> TokenVerifier | None:
    if config.mode == "off":
        log.warning(
            "AUTHENTICATION IS OFF (KEEL_AUTH=off): every caller is a local admin. "
            "Never expose this API beyond your own machine."
        )
        return None
    return TokenVerifier(config)


def cli_token(settings: Settings) -> str | None:
    """The token the CLI sends: KEEL_TOKEN, or one minted from the local secret."""
    if settings.token is not None:
        return settings.token.get_secret_value()
    if settings.auth_mode == "off" or settings.jwks_url is not None:
        return None
    secret = settings.jwt_secret or local_secret(settings.data_dir)
    return dev_token(
        secret,
        LOCAL_TENANT,
        LOCAL_SUBJECT,
        scopes=["keel:admin"],
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
    )
