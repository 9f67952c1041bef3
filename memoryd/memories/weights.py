"""The one decay formula, shared by maintenance and ranking.

    effective_weight(now) = weight * 0.5 ** (days(now - weight_at) / half_life(tier))

Decay is lazy: nothing rewrites rows as time passes. `set_weight` stores the decayed
value, moves `weight_at` to now and derives `archive_due_at`, the moment the curve
crosses `archive_threshold`:

    archive_due_at = weight_at + half_life * log2(weight / archive_threshold)

so the archive sweep reads only rows whose due time has passed (an index range scan).
Recall's reinforcement (`reinforced`) only adds weight, which postpones that moment; it
leaves archive_due_at as a lower bound, and the sweep re-derives it before archiving.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, Protocol

from memoryd.models.tables import Memory, Tier
from memoryd.settings import MemorySettings

MAX_WEIGHT = 5.0
INITIAL_WEIGHT = 1.0
SECONDS_PER_DAY = 86_400.0
# Far enough never to be due, small enough for every database's datetime range.
NEVER_DAYS = 365 * 1000
TTL_STEP = timedelta(hours=1)


def half_life_days(tier: str, settings: MemorySettings) -> float:
    return settings.half_life_long_days if tier == Tier.LONG else settings.half_life_short_days


def decayed(weight: float, weight_at: datetime, now: datetime, half_life: float) -> float:
    age_days = max((now - weight_at).total_seconds(), 0.0) / SECONDS_PER_DAY
    return float(weight * 0.5 ** (age_days / half_life))


class Weighted(Protocol):
    """A memory row, or any row read with its weight columns (recall reads only those)."""

    @property
    def weight(self) -> float: ...
    @property
    def weight_at(self) -> datetime: ...
    @property
    def tier(self) -> str: ...


def effective_weight(memory: Weighted, now: datetime, settings: MemorySettings) -> float:
    return decayed(memory.weight, memory.weight_at, now, half_life_days(memory.tier, settings))


def archive_due(
    weight: float, weight_at: datetime, tier: str, settings: MemorySettings
) -> datetime | None:
    """When a long-tier memory's decayed weight reaches the archive threshold."""
    if tier != Tier.LONG:
        return None
    if settings.archive_threshold <= 0:
        return weight_at + timedelta(days=NEVER_DAYS)
    if weight <= settings.archive_threshold:
        return weight_at
    days = settings.half_life_long_days * math.log2(weight / settings.archive_threshold)
    return weight_at + timedelta(days=min(days, NEVER_DAYS))


def set_weight(memory: Memory, weight: float, now: datetime, settings: MemorySettings) -> None:
    """The only writer of weight, weight_at and archive_due_at on a loaded memory."""
    memory.weight = min(max(weight, 0.0), MAX_WEIGHT)
    memory.weight_at = now
    memory.archive_due_at = archive_due(memory.weight, now, memory.tier, settings)


def reinforced(
    tier: str,
    weight: float,
    weight_at: datetime,
    amount: float,
    now: datetime,
    settings: MemorySettings,
) -> dict[str, Any]:
    """The weight columns after adding `amount` to the decayed weight, re-anchored at
    `now`: for set-based updates of rows read under a lock (recall's usage feedback).
    archive_due_at is left as it is: a positive amount only postpones the moment the
    weight decays to archive_threshold, and the archive sweep re-derives it."""
    value = decayed(weight, weight_at, now, half_life_days(tier, settings)) + amount
    return {"weight": min(max(value, 0.0), MAX_WEIGHT), "weight_at": now}


def reinforce(memory: Memory, amount: float, now: datetime, settings: MemorySettings) -> None:
    """Add `amount` to the decayed weight and re-anchor the curve at `now`."""
    set_weight(memory, effective_weight(memory, now, settings) + amount, now, settings)


def restarted_ttl(
    tier: str, expires_at: datetime | None, now: datetime, settings: MemorySettings
) -> datetime | None:
    """A short-tier memory's TTL restarts on every access ("not accessed since"),
    rounded up to the whole hour: the recalls of one hour then leave the indexed
    expires_at as it is, and a memory never expires sooner than its TTL after use."""
    if tier != Tier.SHORT or expires_at is None:
        return expires_at
    return max(expires_at, ttl_restarted_at(now, settings))


def ttl_restarted_at(now: datetime, settings: MemorySettings) -> datetime:
    """When a short-tier memory used at `now` expires, at the earliest: its TTL from
    now, rounded up to the whole hour."""
    restarted = now + timedelta(days=settings.short_ttl_days)
    hour = restarted.replace(minute=0, second=0, microsecond=0)
    return hour if hour == restarted else hour + TTL_STEP


def reinforce_observed(memory: Memory, now: datetime, settings: MemorySettings) -> None:
    """Extraction saw the fact again."""
    reinforce(memory, settings.reinforce_observed, now, settings)
