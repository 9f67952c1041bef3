"""`memoryd.extract_session`: extract one session's pending turns, batch by batch."""

from __future__ import annotations

import logging
import traceback
from typing import Any

from memoryd.errors import BatchFailed, error_text
from memoryd.extraction.batch import extract_session as run_extraction
from memoryd.ingest.dispatch import dispatch_extract
from memoryd.models.keys import SessionKey
from memoryd.settings import get_settings
from memoryd.tasks.embedding import send_fill
from memoryd.worker import app

SWEEP_TASK = "memoryd.maintenance.sweep"
log = logging.getLogger(__name__)


@app.task(name="memoryd.extract_session")
def extract_session(agent_id: str, user_id: str, session_id: str) -> dict[str, Any]:
    key = SessionKey(agent_id, user_id, session_id)
    settings = get_settings()
    try:
        stats = run_extraction(settings, key)
    except Exception as exc:
        # A bug, recorded on its batch already. The task's error and traceback are what
        # Flower and the result backend keep: its frames, never its message (which may
        # quote what was said).
        where = "".join(traceback.format_tb(exc.__traceback__))
        log.error("extraction of %s failed: %s\n%s", label(key), error_text(exc), where)
        raise BatchFailed(f"{label(key)}: unexpected {error_text(exc)}") from None
    if stats.created:
        send_fill(settings, key.scope)  # no-op unless embeddings are on
    if stats.more_pending:
        # Yield the worker to other sessions; the rest continues in a fresh task.
        dispatch_extract(app, [key])
    if stats.circuit_closed:
        # This batch was the probe that ended an outage: every waiting session may go
        # now, not at the next beat of the sweep.
        app.send_task(SWEEP_TASK)
    if stats.failed_batches:
        # The batch is recorded and its turns kept; failing the task makes it visible.
        raise BatchFailed(f"{label(key)}: {stats.error}")
    return stats.as_dict()


def label(key: SessionKey) -> str:
    return f"{key.agent_id}/{key.user_id}/{key.session_id}"
