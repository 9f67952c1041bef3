"""The one decay formula, shared by maintenance and ranking.

effective_weight = weight * 0.5 ** (age_days / half_life_days(tier)), with age measured
from `weight_at`. Writes store the decayed value and move `weight_at` forward, so the
stored pair always describes the same curve (lazy decay).
"""

from __future__ import annotations

from datetime import datetime

from memoryd.models.tables import Memory, Tier
from memoryd.settings import Settings

MAX_WEIGHT = 5.0
SECONDS_PER_DAY = 86_400.0


def half_life_days(tier: str, settings: Settings) -> float:
    return settings.half_life_long_days if tier == Tier.LONG else settings.half_life_short_days


def decayed(weight: float, weight_at: datetime, now: datetime, half_life: float) -> float:
    age_days = max((now - weight_at).total_seconds(), 0.0) / SECONDS_PER_DAY
    return float(weight * 0.5 ** (age_days / half_life))


def effective_weight(memory: Memory, now: datetime, settings: Settings) -> float:
    return decayed(memory.weight, memory.weight_at, now, half_life_days(memory.tier, settings))


def reinforce(memory: Memory, amount: float, now: datetime, settings: Settings) -> None:
    """Add `amount` to the decayed weight and re-anchor the curve at `now`."""
    memory.weight = min(effective_weight(memory, now, settings) + amount, MAX_WEIGHT)
    memory.weight_at = now
