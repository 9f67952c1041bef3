"""`memoryd.extract_session`: extract one session's pending turns, batch by batch."""

from __future__ import annotations

from typing import Any

from memoryd import tracing
from memoryd.errors import BatchFailed
from memoryd.extraction.batch import extract_session as run_extraction
from memoryd.ingest.dispatch import dispatch_extract, triggered_key
from memoryd.models.keys import SessionKey
from memoryd.settings import get_settings
from memoryd.tasks.embedding import send_fill
from memoryd.tasks.guard import guarded
from memoryd.tasks.traced import traced
from memoryd.worker import app

SWEEP_TASK = "memoryd.maintenance.sweep"


@app.task(name="memoryd.extract_session")
@traced
@guarded
def extract_session(agent_id: str, user_id: str, session_id: str) -> dict[str, Any]:
    key = triggered_key(agent_id, user_id, session_id)
    settings = get_settings()
    stats = run_extraction(settings, key)
    if stats.created:
        send_fill(settings, key.scope)  # no-op unless embeddings are on
    if stats.more_pending:
        # Yield the worker to other sessions; the rest continues in a fresh task.
        dispatch_extract(app, [key], headers=tracing.headers(settings.server))
    if stats.circuit_closed:
        # This batch was the probe that ended an outage: every waiting session may go
        # now, not at the next beat of the sweep.
        app.send_task(SWEEP_TASK, headers=tracing.headers(settings.server))
    if stats.failed_batches:
        # The batch is recorded and its turns kept; failing the task makes it visible.
        raise BatchFailed(f"{label(key)}: {stats.error}")
    return stats.as_dict()


def label(key: SessionKey) -> str:
    return f"{key.agent_id}/{key.user_id}/{key.session_id}"
