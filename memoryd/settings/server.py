"""Serving: the HTTP server and its page (memoryd serve), MCP (memoryd mcp), tracing."""

from __future__ import annotations

from pydantic import Field, field_validator

from memoryd.settings import checks
from memoryd.settings.part import Part


class ServerSettings(Part):
    max_request_bytes: int = Field(16 * 1024 * 1024, ge=1024, description="Largest HTTP body")
    page_session_hours: float = Field(
        12.0, gt=0, le=24 * 30, description="How long a page sign-in lasts"
    )
    dev_mode: bool = Field(
        False,
        description="Development server: the page's cookie works over plain HTTP (not Secure)",
    )
    api_key_cache_seconds: float = Field(
        5.0, ge=0, description="How long a looked-up API key is trusted (revocation delay)"
    )
    auth_failure_limit: int = Field(
        20,
        ge=0,
        description="Wrong keys a client address may try per minute before 429 (0: no limit)",
    )

    # MCP server (memoryd mcp)
    # A Settings field, not a variable of its own, so it is validated and listed with the
    # rest; repr=False keeps the secret out of logged or printed settings.
    mcp_key: str | None = Field(
        None,
        repr=False,
        description="API key `memoryd mcp` acts with over stdio (memoryd keys create); "
        "over HTTP each client sends its own",
    )

    # Tracing
    tracing: bool = Field(
        False,
        description="OpenTelemetry spans (pip install 'memoryd[otel]'); OTEL_* variables "
        "choose the exporter",
    )

    @field_validator("tracing")
    @classmethod
    def _tracing_installed(cls, value: bool) -> bool:
        return checks.tracing_installed(value)
