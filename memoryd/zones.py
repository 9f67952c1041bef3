"""The user's time zone, one reading for every side: extraction dates turns by it, the
context block says "today" by it, and profile writes accept only what it can read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

# "UTC+8", "GMT-03:30", "utc +5:45": the offsets people write instead of a zone name.
_OFFSET = re.compile(r"(?:UTC|GMT)\s*([+-])(\d{1,2})(?::?(\d\d))?", re.IGNORECASE)
_MAX_OFFSET = timedelta(hours=14)  # the widest offset in use (Kiribati)


@cache
def _iana_names() -> frozenset[str]:
    return frozenset(available_timezones())  # reads the zone database once per process


def parse_zone(name: str) -> tzinfo | None:
    """The zone an IANA name ("Europe/Lisbon") or a UTC offset ("UTC+8", "UTC-03:30")
    names, or None when it names none."""
    name = name.strip()
    if match := _OFFSET.fullmatch(name):
        sign, hours, minutes = match.groups()
        if int(minutes or 0) >= 60:
            return None
        offset = timedelta(hours=int(hours), minutes=int(minutes or 0))
        if offset > _MAX_OFFSET:
            return None
        return timezone(-offset if sign == "-" else offset)
    if name not in _iana_names():
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def user_zone(profiles: Mapping[str, Mapping[str, Any] | None] | None) -> tzinfo:
    """The zone of the user profile's `timezone`, else UTC (a value stored before profile
    values were checked may name none)."""
    name = ((profiles or {}).get("user") or {}).get("timezone")
    if not isinstance(name, str):
        return UTC
    return parse_zone(name) or UTC


def local(at: datetime, zone: tzinfo) -> datetime:
    """`at` in `zone`; in UTC when `zone` would carry it past year 1 or 9999, so an
    extreme stored timestamp is shown, never an OverflowError."""
    try:
        return at.astimezone(zone)
    except (OverflowError, ValueError):
        return at.astimezone(UTC)
