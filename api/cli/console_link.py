"""The console link `keel dev` and `keel console` print: it signs the browser in as the
local user. The token rides in the URL's fragment, which browsers never send to a server,
and is short-lived: the console exchanges it at once for a session cookie."""

from __future__ import annotations

from keel.api.identity.config import LOCAL_SUBJECT, LOCAL_TENANT
from keel.api.identity.console_session import console_link_token
from keel.worker.config.local_secrets import local_secret
from keel.worker.config.settings import Settings

LINK_TTL_S = 900


def console_link(settings: Settings, api_url: str) -> str:
    """`…/console/#signin=<token>`; without a local secret to sign with, the plain page."""
    page = f"{api_url.rstrip('/')}/console/"
    if settings.auth_mode == "off" or settings.jwks_url is not None:
        return page  # auth off: nothing to sign in; JWKS: tokens come from the provider
    secret = settings.jwt_secret or local_secret(settings.data_dir)
    token = console_link_token(
        secret,
        LOCAL_TENANT,
        LOCAL_SUBJECT,
        ["keel:admin"],
        ttl_s=LINK_TTL_S,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
    )
    return f"{page}#signin={token}"
