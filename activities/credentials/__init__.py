"""Per-user credentials for tool backends and secrets given by reference.

A backend configured to be called as the user gets that user's token, obtained by
OAuth2 token exchange or from a refresh token the user granted, cached sealed in
Postgres (`UserTokens`); a secret a user types in answer to a `secret_ref`
interaction is sealed too (`SecretStore`), and a workflow holds only its reference.
"""

from keel.activities.credentials.backends import UserCredentialBackend, backend_for
from keel.activities.credentials.sealing import Sealer
from keel.activities.credentials.secret_store import SecretStore, is_secret_ref
from keel.activities.credentials.user_tokens import (
    CredentialNeeded,
    CredentialRefused,
    SubjectAssertions,
    UserTokens,
)

__all__ = [
    "CredentialNeeded",
    "CredentialRefused",
    "Sealer",
    "SecretStore",
    "SubjectAssertions",
    "UserCredentialBackend",
    "UserTokens",
    "backend_for",
    "is_secret_ref",
]
