"""Request fields that schedules and webhooks share, each checked with a clear sentence."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from keel.api.core.schedules.cron import CronError, CronExpression

__all__ = ["CronText", "TimeZoneName", "WebhookUrl", "check_cron", "check_time_zone"]

MAX_URL_CHARS = 2048


def check_cron(text: str) -> str:
    """The expression, normalised (single spaces), if Keel accepts it."""
    try:
        return CronExpression.parse(text).text
    except CronError as exc:
        raise PydanticCustomError("cron_expression", "{reason}", {"reason": str(exc)}) from None


def check_time_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise PydanticCustomError(
            "time_zone",
            "{reason}",
            {
                "reason": f"Unknown time zone {name!r}; use an IANA name such as UTC, "
                "Europe/Berlin or America/New_York."
            },
        ) from None
    return name


def check_webhook_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PydanticCustomError(
            "webhook_url",
            "{reason}",
            {"reason": "A webhook URL must be an http:// or https:// URL with a host."},
        )
    if any(c.isspace() for c in url):
        raise PydanticCustomError(
            "webhook_url", "{reason}", {"reason": "A webhook URL may not contain whitespace."}
        )
    return url


CronText = Annotated[str, Field(max_length=200), AfterValidator(check_cron)]
"""A five-field cron expression (or @hourly, @daily, ...), as Temporal will read it."""
TimeZoneName = Annotated[str, Field(max_length=64), AfterValidator(check_time_zone)]
"""An IANA time zone name, e.g. `Europe/Berlin`."""
WebhookUrl = Annotated[str, Field(max_length=MAX_URL_CHARS), AfterValidator(check_webhook_url)]
"""Where to POST signed notices: http or https."""
