"""What a turn handed to memoryd may hold."""

from __future__ import annotations

from pydantic import Field

from memoryd.settings.part import Part


class IngestSettings(Part):
    max_turn_chars: int = Field(
        32_000, gt=0, description="Longest turn text accepted; longer is rejected by name"
    )
    max_bulk_turns: int = Field(10_000, gt=0, description="Most turns in one enqueue_turns call")
    max_metadata_bytes: int = Field(16_384, gt=0, description="A turn's metadata as JSON")
    max_clock_skew_seconds: float = Field(
        300,
        ge=0,
        description="How far a turn's timestamp may be ahead of the database clock",
    )
