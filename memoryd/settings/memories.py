"""A memory's life: tiers, TTLs, weights and their decay, promotion, retention."""

from __future__ import annotations

from pydantic import Field

from memoryd.settings.part import Part


class MemorySettings(Part):
    short_ttl_days: float = Field(
        7.0, gt=0, description="A short-term memory expires this long after its last use"
    )
    followup_ttl_days: float = Field(3.0, gt=0, description="TTL of a temporary 'followup' fact")
    mood_ttl_days: float = Field(1.0, gt=0, description="TTL of a temporary 'mood' fact")
    half_life_short_days: float = Field(
        7.0, gt=0, description="Short-term weights halve in this time"
    )
    half_life_long_days: float = Field(
        90.0, gt=0, description="Long-term weights halve in this time"
    )
    archive_threshold: float = Field(
        0.1, ge=0, description="Memories whose weight decays below it are archived"
    )
    turn_retention_days: float = Field(
        90.0, ge=0, description="Days extracted turns are kept (once summarised); 0: forever"
    )
    usage_retention_days: float = Field(
        90.0, ge=0, description="Days each recall's usage rows are kept; 0: forever"
    )
    batch_retention_days: float = Field(
        30.0, ge=0, description="Days finished extraction batches are kept; 0: forever"
    )
    deleted_retention_days: float = Field(
        30.0, ge=0, description="Days a deleted memory can be restored before its text is purged"
    )
    # Archiving already means long unused (a new fact left alone decays to the threshold
    # in 299 days by default), so a further year to restore it is ample.
    archived_retention_days: float = Field(
        365.0,
        ge=0,
        description="Days an archived memory (unused for months: decayed below "
        "archive_threshold) can be restored before it is purged; 0: forever",
    )
    promote_access_count: int = Field(
        3, ge=1, description="Recalls that make a short-term memory long-term"
    )
    reinforce_retrieved: float = Field(
        0.05, ge=0, description="Weight a memory gains per recall that returns it"
    )
    reinforce_referenced: float = Field(
        0.15, ge=0, description="Weight a memory gains when a reply used it"
    )
    reinforce_observed: float = Field(
        0.3, ge=0, description="Weight a memory gains when extraction sees it again"
    )
