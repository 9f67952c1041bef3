"""Beat tasks on the `maintenance` queue."""

from __future__ import annotations

from typing import Any

from memoryd.ingest.dispatch import dispatch_extract
from memoryd.ingest.leases import reap_expired_leases, sessions_due
from memoryd.maintenance.compression import compress_due_sessions
from memoryd.maintenance.cycle import run_cycle
from memoryd.models.db import session_scope, utcnow
from memoryd.settings import get_settings
from memoryd.worker import app


@app.task(name="memoryd.maintenance.sweep")
def sweep() -> dict[str, Any]:
    """Return expired leases to pending and re-dispatch every session with due turns,
    so a lost broker message or a killed worker only delays work."""
    settings = get_settings()
    with session_scope(settings) as session:
        now = utcnow()
        reaped = reap_expired_leases(session, settings, now)
        due = sessions_due(session, settings, now)
    return {"reaped_leases": reaped, "dispatched": dispatch_extract(app, due)}


@app.task(name="memoryd.maintenance.cycle")
def cycle() -> dict[str, Any]:
    """Promote, expire and archive what is due; returns the counts Flower shows."""
    return run_cycle(get_settings()).as_dict()


@app.task(name="memoryd.maintenance.compress_sessions")
def compress_sessions() -> dict[str, Any]:
    """Summarise long sessions (segments + synopsis); returns how many were due and done."""
    return compress_due_sessions(get_settings())
