"""`memoryd.ingest_turns`: the language-neutral way in (payload documented in README)."""

from __future__ import annotations

from functools import cache
from typing import Any

from memoryd.client import MemoryClient
from memoryd.settings import get_settings
from memoryd.worker import app


@cache
def _client() -> MemoryClient:
    return MemoryClient(get_settings(), celery_app=app)


@app.task(name="memoryd.ingest_turns")
def ingest_turns(payload: Any) -> dict[str, Any]:
    """Store turns sent by any Celery client. Bad items are reported, good ones kept."""
    return _client().ingest_payload(payload).model_dump()
