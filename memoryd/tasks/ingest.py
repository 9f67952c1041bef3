"""`memoryd.ingest_turns`: the language-neutral way in (payload documented in README)."""

from __future__ import annotations

from typing import Any

from memoryd.ingest.buffer import ingest, payload_items
from memoryd.ingest.dispatch import dispatch_extract
from memoryd.models.db import utcnow
from memoryd.settings import get_settings
from memoryd.worker import app


@app.task(name="memoryd.ingest_turns")
def ingest_turns(payload: Any) -> dict[str, Any]:
    """Store turns sent by any Celery client. Bad items are reported, good ones kept."""
    result, due = ingest(get_settings(), payload_items(payload), utcnow())
    result.dispatched_sessions = dispatch_extract(app, due)
    return result.model_dump()
