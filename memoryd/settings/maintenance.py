"""Beat's work: session compression and how often each job runs."""

from __future__ import annotations

from pydantic import Field

from memoryd.settings.part import Part


class MaintenanceSettings(Part):
    compress_trigger_tokens: int = Field(
        4000, ge=1, description="A session's unsummarised tokens past this are compressed"
    )
    keep_recent_turns: int = Field(10, ge=0, description="Turns a compression leaves unsummarised")

    # Beat intervals (seconds)
    sweep_interval_seconds: float = Field(
        15.0,
        gt=0,
        description="Beat: stranded turns re-dispatched, recalls' usage folded, changed "
        "tables analysed",
    )
    maintenance_interval_seconds: float = Field(
        3600.0, gt=0, description="Beat: promotion, expiry, archiving, retention"
    )
    compress_interval_seconds: float = Field(
        600.0, gt=0, description="Beat: long sessions compressed"
    )
