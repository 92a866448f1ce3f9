"""Page cursors: where the last page of a newest-first list ended, opaque to clients."""

from __future__ import annotations

import base64
from datetime import datetime

from keel.api.core.errors import Invalid
from keel.api.core.schemas.common import storable


def encode_cursor(created_at: datetime, row_id: str) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{row_id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The (created_at, id) a cursor names; 422 naming `cursor` if it is not one we made."""
    try:
        stamp, row_id = base64.urlsafe_b64decode(cursor.encode()).decode().split("|", 1)
        return datetime.fromisoformat(stamp), storable(row_id)
    except ValueError as exc:  # bad base64, bad UTF-8, no `|`, bad time, or unstorable
        raise Invalid(
            "Malformed cursor; pass back the `next_cursor` of the previous page unchanged.",
            field="cursor",
            where="query",
        ) from exc
