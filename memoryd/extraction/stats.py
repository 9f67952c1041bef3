"""Pipeline figures for `memoryd stats` and monitoring: what the batches recorded, the
removed ones included (memoryd/models/batch_totals.py).

Memory totals are health.memory_health's; `memoryd stats` prints both."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from memoryd.memories.health import INDEXED_TURN_STATUSES, count_turns
from memoryd.models.batch_totals import batch_figures
from memoryd.models.db import session_scope
from memoryd.recall import backfill
from memoryd.settings import Settings


def pipeline_stats(settings: Settings) -> dict[str, Any]:
    with session_scope(settings.storage, readonly=True) as session:
        # Waiting, in extraction, dead-lettered: through their partial indexes.
        counted = {str(s): count_turns(session, s) for s in INDEXED_TURN_STATUSES}
        turns = {status: n for status, n in counted.items() if n}
        batches = batch_figures(session)
        vectors = backfill.coverage(settings, session) if settings.embeddings_on else None
    last = batches.last_finished_at
    return {
        "turns": turns,
        "batches": dict(batches.by_status),
        "tokens_in": batches.tokens_in,
        "tokens_out": batches.tokens_out,
        "llm_calls": batches.llm_calls,
        "facts_proposed": batches.facts_proposed,
        "facts_accepted": batches.facts_accepted,
        "rejections": dict(batches.rejections),
        "last_batch_at": last.isoformat() if last else None,
        # The same per kind: extraction batches and compression runs.
        "by_kind": {
            kind: {
                "batches": dict(f.by_status),
                "llm_calls": f.llm_calls,
                "tokens_in": f.tokens_in,
                "tokens_out": f.tokens_out,
            }
            for kind, f in batches.kinds.items()
        },
        # Active memories with a vector, waiting for one, refused by the endpoint for good,
        # holding another model's vector.
        "embeddings": asdict(vectors) if vectors else None,
    }
