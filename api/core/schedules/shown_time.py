"""How a schedule's times read to people: in the schedule's own time zone, on every surface.

A schedule made for Europe/Berlin fires at Berlin's 02:00, so its next fire times, its
runs and its backfills are shown in Berlin time, named by the zone and its offset then
(`Wed 2026-12-02 02:00:00 Europe/Berlin (UTC+01:00)`), in the CLI and the console alike
(`api/console/assets/dom.js` `fmtZoned` draws the same string). The API answers instants
in UTC (ISO 8601) with the schedule's `time_zone` beside them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo


def in_zone(moment: datetime, zone: str) -> str:
    """`moment` as the schedule's zone reads it, naming the zone and its UTC offset."""
    local = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(ZoneInfo(zone))
    offset = local.strftime("%z") or "+0000"
    return f"{local:%a %Y-%m-%d %H:%M:%S} {zone} (UTC{offset[:3]}:{offset[3:]})"
