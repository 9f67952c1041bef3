"""Beat tasks on the `maintenance` queue."""

from __future__ import annotations

from typing import Any

from memoryd import tracing
from memoryd.ingest.dispatch import dispatch_extract
from memoryd.ingest.sweeper import run_sweep
from memoryd.maintenance.compression import compress_due_sessions
from memoryd.maintenance.cycle import run_cycle
from memoryd.maintenance.statistics import analyze_due
from memoryd.maintenance.usage import fold_usage
from memoryd.settings import get_settings
from memoryd.tasks.embedding import send_fill
from memoryd.tasks.guard import guarded
from memoryd.tasks.traced import traced
from memoryd.worker import app


@app.task(name="memoryd.maintenance.sweep")
@traced
@guarded
def sweep() -> dict[str, Any]:
    """Return stranded turns to pending and re-dispatch every session with due turns,
    so a lost broker message or a killed worker only delays work; send memories without
    vectors to be embedded; fold recalls' usage; ANALYZE the tables that changed."""
    settings = get_settings()
    result = run_sweep(settings)
    return {
        "returned_turns": result.returned_turns,
        "circuit_open": result.circuit_open,
        "dispatched": dispatch_extract(app, result.due, headers=tracing.headers(settings.server)),
        # Memories saved directly (remember, update, import) and those a failed fill
        # left get their vectors on the embedding queue, off the chat path.
        "fill_sent": send_fill(settings),
        # What recalls used since the last sweep reaches weights, access counts, TTLs.
        "usage_folded": fold_usage(settings),
        # Statistics within seconds of a bulk load, not an hour (maintenance/statistics.py).
        "tables_analyzed": analyze_due(settings.storage),
    }


@app.task(name="memoryd.maintenance.cycle")
@traced
@guarded
def cycle() -> dict[str, Any]:
    """Promote, expire and archive what is due; returns the counts Flower shows."""
    return run_cycle(get_settings()).as_dict()


@app.task(name="memoryd.maintenance.compress_sessions")
@traced
@guarded
def compress_sessions() -> dict[str, Any]:
    """Summarise long sessions (segments + synopsis); returns how many were due and done."""
    return compress_due_sessions(get_settings())
