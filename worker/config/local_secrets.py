"""Secrets kept in the data directory when none is configured (mode 0600, made once)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from pydantic import SecretStr

JWT_SECRET_FILE = "jwt-secret"


def local_secret(data_dir: Path, name: str = JWT_SECRET_FILE) -> SecretStr:
    """The secret in `data_dir/name`, made on first use; concurrent makers agree."""
    path = data_dir.expanduser() / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32))
    return SecretStr(path.read_text().strip())
