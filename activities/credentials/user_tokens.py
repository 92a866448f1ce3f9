"""A run's user's token for a backend called as the user: cached, refreshed, obtained.

For a URL under a configured backend (`KEEL_USER_CREDENTIALS`), `UserTokens.bearer`
answers the cached token of (tenant, user, backend) while it has more than a margin
left; otherwise it obtains a new one — by RFC 8693 token exchange with a subject token
Keel signs for the user (`SubjectAssertions`), or from the refresh token the user
granted — and caches it sealed. A backend with no credential for the user raises
`CredentialNeeded`: the run asks the user (a `secret_ref` interaction). URLs under no
such backend get the worker-wide token of `KEEL_MCP_TOKENS` / `KEEL_A2A_TOKENS`.

Tokens stay in this process: never in a payload, an event, an error text or a log line
(an error names the backend and the HTTP status only).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import httpx
import jwt
from pydantic import SecretStr

from keel.activities.credentials.backends import UserCredentialBackend, backend_for
from keel.activities.credentials.credential_store import CredentialStore, UserCredential

__all__ = [
    "ASSERTION_TOKEN_TYPE",
    "CredentialNeeded",
    "CredentialRefused",
    "SubjectAssertions",
    "UserTokens",
]

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ASSERTION_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
# A token with less than this left is refreshed before it is used: a call takes time.
REFRESH_MARGIN = timedelta(seconds=60)
# The subject assertion only has to outlive one request to the token endpoint.
ASSERTION_TTL_S = 120
TOKEN_ENDPOINT_TIMEOUT_S = 30.0


class CredentialNeeded(Exception):
    """The user has no usable credential for the backend; asking the user may help."""

    def __init__(self, backend: str, prompt: str) -> None:
        super().__init__(f"No credential of the run's user for {backend}.")
        self.backend = backend
        self.prompt = prompt


class CredentialRefused(Exception):
    """The backend's token endpoint refused or failed; the sentence names no secret."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class SubjectAssertions:
    """Short-lived assertions Keel signs (HS256) that a run acts for one user.

    The subject token of a token exchange: the worker cannot hold the user's own sign-in
    token (it would sit in the workflow's history), but it can vouch for the run's
    tenant and user with a key the backend's token endpoint trusts.
    """

    def __init__(self, secret: SecretStr, issuer: str) -> None:
        self._secret = secret
        self._issuer = issuer

    def for_user(self, tenant_id: str, user: str, audience: str) -> str:
        now = int(time.time())
        claims = {
            "iss": self._issuer,
            "sub": user.removeprefix("user:"),
            "tenant_id": tenant_id,
            "aud": audience,
            "iat": now,
            "nbf": now,
            "exp": now + ASSERTION_TTL_S,
            "jti": secrets.token_hex(16),
            "token_use": "keel_subject",
        }
        return jwt.encode(claims, self._secret.get_secret_value().encode(), algorithm="HS256")


class UserTokens:
    """Bearer tokens for tool backends: the user's own where configured, else the worker's."""

    def __init__(
        self,
        backends: Mapping[str, UserCredentialBackend],
        store: CredentialStore,
        assertions: SubjectAssertions,
        *,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._backends = dict(backends)
        self._store = store
        self._assertions = assertions
        self._http = http

    def as_user(self, url: str) -> bool:
        return backend_for(url, self._backends) is not None

    async def bearer(self, url: str, tenant_id: str, user: str) -> str:
        """The user's token for the backend `url` lies under (`as_user(url)` must hold)."""
        found = backend_for(url, self._backends)
        assert found is not None, "bearer() is for URLs of backends called as the user"
        prefix, backend = found
        stored = await self._store.get(tenant_id, user, prefix)
        now = datetime.now(UTC)
        if stored is not None and stored.access_token and _fresh(stored, now):
            return stored.access_token
        if backend.grant == "user_token":
            # A token the user gave is used until it expires; then they are asked again.
            raise CredentialNeeded(prefix, _prompt(backend, prefix))
        if backend.grant == "refresh_token":
            refresh = stored.refresh_token if stored is not None else None
            if not refresh:
                raise CredentialNeeded(prefix, _prompt(backend, prefix))
            form = {"grant_type": "refresh_token", "refresh_token": refresh}
        else:
            form = {
                "grant_type": TOKEN_EXCHANGE_GRANT,
                "subject_token": self._assertions.for_user(
                    tenant_id, user, backend.audience or str(backend.token_url)
                ),
                "subject_token_type": ASSERTION_TOKEN_TYPE,
                "requested_token_type": ACCESS_TOKEN_TYPE,
            }
            if backend.audience:
                form["audience"] = backend.audience
        if backend.scope:
            form["scope"] = backend.scope
        issued = await self._token_request(prefix, backend, form)
        if issued is None:  # the refresh token was refused: it is gone, ask for a new one
            await self._store.forget(tenant_id, user, prefix)
            raise CredentialNeeded(prefix, _prompt(backend, prefix))
        await self._store.put(tenant_id, user, prefix, issued)
        assert issued.access_token is not None
        return issued.access_token

    async def adopt(self, url: str, tenant_id: str, user: str, secret: str) -> None:
        """Keep what the user gave for the backend: their refresh token or their own token."""
        found = backend_for(url, self._backends)
        if found is None:
            return
        prefix, backend = found
        if backend.grant == "refresh_token":
            credential = UserCredential(refresh_token=secret)
        else:
            credential = UserCredential(
                access_token=secret, expires_at=datetime.now(UTC) + timedelta(seconds=backend.ttl_s)
            )
        await self._store.put(tenant_id, user, prefix, credential)

    async def _token_request(
        self, prefix: str, backend: UserCredentialBackend, form: dict[str, str]
    ) -> UserCredential | None:
        """What the token endpoint issued; None when it refused a refresh token."""
        assert backend.token_url is not None
        auth: httpx.Auth | httpx._client.UseClientDefault = httpx.USE_CLIENT_DEFAULT
        if backend.client_id:
            secret = backend.client_secret.get_secret_value() if backend.client_secret else ""
            auth = httpx.BasicAuth(backend.client_id, secret)
        try:
            if self._http is not None:
                response = await self._http.post(backend.token_url, data=form, auth=auth)
            else:
                async with httpx.AsyncClient(timeout=TOKEN_ENDPOINT_TIMEOUT_S) as http:
                    response = await http.post(backend.token_url, data=form, auth=auth)
        except httpx.HTTPError as exc:
            raise CredentialRefused(
                f"The token endpoint of {prefix} could not be reached ({type(exc).__name__}).",
                retryable=True,
            ) from None
        if response.status_code in (400, 401) and form["grant_type"] == "refresh_token":
            return None
        if response.status_code >= 500 or response.status_code == 429:
            raise CredentialRefused(
                f"The token endpoint of {prefix} answered {response.status_code}.", retryable=True
            )
        if response.status_code != 200:
            raise CredentialRefused(
                f"The token endpoint of {prefix} refused to issue a token for the run's user "
                f"({response.status_code}).",
                retryable=False,
            )
        try:
            body = response.json()
            token = body["access_token"]
            assert isinstance(token, str) and token
        except Exception:
            raise CredentialRefused(
                f"The token endpoint of {prefix} answered without an access token.",
                retryable=False,
            ) from None
        lifetime = backend.ttl_s
        expires_in = body.get("expires_in")
        if isinstance(expires_in, int | float) and expires_in > 0:
            lifetime = min(lifetime, int(expires_in))
        refresh = body.get("refresh_token")
        return UserCredential(
            access_token=token,
            expires_at=datetime.now(UTC) + timedelta(seconds=lifetime),
            refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        )


def _fresh(credential: UserCredential, now: datetime) -> bool:
    """More than a margin left: a minute, or a tenth of the lifetime of a short token."""
    if credential.expires_at is None:
        return True
    margin = REFRESH_MARGIN
    if credential.issued_at is not None:
        margin = min(margin, (credential.expires_at - credential.issued_at) / 10)
    return credential.expires_at - margin > now


def _prompt(backend: UserCredentialBackend, prefix: str) -> str:
    if backend.prompt:
        return backend.prompt
    what = "a refresh token" if backend.grant == "refresh_token" else "your access token"
    return f"This agent calls {prefix} as you: give {what} for it."
