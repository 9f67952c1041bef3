"""`memoryd.embed_memories`: give memories their vectors, on the `embedding` queue, so a
slow or refusing embedding endpoint never holds an extraction slot."""

from __future__ import annotations

from typing import Any

from memoryd import tracing
from memoryd.models.keys import Scope
from memoryd.recall.backfill import any_waiting, fill_missing
from memoryd.settings import Settings, get_settings
from memoryd.tasks.guard import guarded
from memoryd.tasks.traced import traced
from memoryd.worker import app
from memoryd.worker.config import EMBED_TASK

EMBED_PER_TASK = 256


@app.task(name="memoryd.embed_memories")
@traced
@guarded
def embed_memories(agent_id: str | None = None, user_id: str | None = None) -> dict[str, Any]:
    """Embed one scope's memories without a vector (every scope's when none is named)."""
    scope = Scope(agent_id, user_id) if agent_id is not None and user_id is not None else None
    # Beat's fill (of every scope) also embeds again what another model wrote.
    fill = fill_missing(get_settings(), scope, limit=EMBED_PER_TASK, other_models=scope is None)
    return {"embedded": fill}


def send_fill(settings: Settings, scope: Scope | None = None) -> bool:
    """Queue a fill when embeddings are on and (for every scope) some memory waits. It
    expires unread after a few sweeps: a queue nobody consumes holds no backlog of
    fills, and beat's sweep sends a fresh one while any memory waits."""
    if not settings.embeddings_on or (scope is None and not any_waiting(settings)):
        return False
    args = [scope.agent_id, scope.user_id] if scope is not None else []
    expires = max(60.0, 4 * settings.maintenance.sweep_interval_seconds)
    app.send_task(EMBED_TASK, args=args, expires=expires, headers=tracing.headers(settings.server))
    return True
