"""The console's browser sign-in: a bearer token exchanged for a session cookie.

The cookie stands in for the token on the console's own requests (with a CSRF header
on writes, `api.identity.console_session`); a refused token or cookie is audited like
any refused credential.
"""

from __future__ import annotations

from keel.api.core.audit_trail import ApiAudit
from keel.api.core.errors import Unauthenticated
from keel.api.identity.auth import AuthConfig, AuthError, Principal, TokenVerifier
from keel.api.identity.console_session import ConsoleSession, ConsoleSessions
from keel.worker.config.local_secrets import local_secret
from keel.worker.config.settings import Settings

__all__ = ["CONSOLE_SECRET_FILE", "ConsoleAccess", "console_sessions"]

CONSOLE_SECRET_FILE = "console-secret"


def console_sessions(settings: Settings, config: AuthConfig) -> ConsoleSessions:
    """KEEL_CONSOLE_SECRET, else the JWT secret, else a file in the data directory."""
    secret = settings.console_secret or config.hs256_secret
    if secret is None:
        secret = local_secret(settings.data_dir, CONSOLE_SECRET_FILE)
    return ConsoleSessions(secret, max_age_s=settings.console_session_s)


class ConsoleAccess:
    def __init__(
        self,
        sessions: ConsoleSessions,
        config: AuthConfig,
        verifier: TokenVerifier | None,
        audit: ApiAudit,
    ) -> None:
        self._sessions = sessions
        self._verifier = verifier
        self._audit = audit
        self.mode = config.mode
        """`jwt`, or `off` (no sign-in: every caller is the local principal)."""

    async def principal_for(
        self, cookie: str, method: str, csrf_header: str | None, *, path: str, client: str | None
    ) -> Principal:
        """The caller of a cookie-authenticated request; `Unauthenticated` (audited) if
        the cookie is no session's or a write lacks its CSRF header."""
        try:
            return self._sessions.principal_for(cookie, method, csrf_header)
        except AuthError as exc:
            await self._audit.auth_refused(exc.message, path, client)
            raise Unauthenticated(exc.message) from exc

    def session(self, cookie: str) -> ConsoleSession | None:
        """The session a cookie names, or None if it is forged, expired or signed out."""
        try:
            return self._sessions.read(cookie)
        except AuthError:
            return None

    async def sign_in(
        self, token: str, *, path: str, client: str | None
    ) -> tuple[str, ConsoleSession]:
        """A session cookie for a valid bearer token; `Unauthenticated` (audited) if not."""
        if self._verifier is None:
            raise Unauthenticated("Authentication is off; there is no sign-in.")
        try:
            return self._sessions.exchange(token, self._verifier)
        except AuthError as exc:
            await self._audit.auth_refused(exc.message, path, client)
            raise Unauthenticated(exc.message) from exc

    def sign_out(self, cookie: str) -> None:
        """Forget the session, so a copied cookie stops working too."""
        self._sessions.sign_out(cookie)
