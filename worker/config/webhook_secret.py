"""The server secret that every tenant's webhook signing secret derives from."""

from __future__ import annotations

import contextlib
import os
import secrets

from keel.worker.config.settings import Settings

SECRET_FILE = "webhook-secret"


def webhook_server_secret(settings: Settings) -> bytes:
    """KEEL_WEBHOOK_SECRET, else the JWT secret, else a file in the data directory.

    The API (which shows tenants their secret) and the workers (which sign) must
    agree: where they do not share a data directory, set KEEL_WEBHOOK_SECRET.
    """
    configured = settings.webhook_secret or settings.jwt_secret
    if configured is not None:
        return configured.get_secret_value().encode()
    path = settings.data_dir.expanduser() / SECRET_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # Two processes may start at once: the first to create the file wins.
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32))
    return path.read_text().strip().encode()
