"""`memoryd.ingest_turns`: the language-neutral way in (payload documented in README)."""

from __future__ import annotations

from typing import Any

from memoryd.client import MemoryClient
from memoryd.settings import get_settings
from memoryd.worker import app


@app.task(name="memoryd.ingest_turns")
def ingest_turns(payload: Any) -> dict[str, Any]:
    """Store turns sent by any Celery client. Bad items are reported, good ones kept."""
    client = MemoryClient(get_settings(), celery_app=app)
    return client.ingest_payload(payload).model_dump()
