"""`memoryd.ingest_turns`: the language-neutral way in (payload documented in docs/ingest.md)."""

from __future__ import annotations

from typing import Any

from celery import Task

from memoryd import tracing
from memoryd.ingest.buffer import ingest, payload_items
from memoryd.ingest.dispatch import dispatch_extract
from memoryd.models.db import utcnow
from memoryd.settings import get_settings
from memoryd.tasks.guard import guarded
from memoryd.tasks.traced import traced
from memoryd.worker import app


@app.task(name="memoryd.ingest_turns", bind=True)
@traced
@guarded
def ingest_turns(self: Task, payload: Any) -> dict[str, Any]:
    """Store turns sent by any Celery client. Bad items are reported, good ones kept.

    A turn without a turn_key gets one made of the task id and its index: a message
    delivered again (acks_late after a worker died) stores nothing twice."""
    key_prefix = f"task:{self.request.id}"
    settings = get_settings()
    result, due = ingest(settings, payload_items(payload), utcnow(), key_prefix)
    result.dispatched_sessions = dispatch_extract(
        app, due, headers=tracing.headers(settings.server)
    )
    return result.model_dump()
