"""Pipeline figures for `memoryd stats` and monitoring: what the batches table records.

Memory totals are health.memory_health's; `memoryd stats` prints both."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from sqlalchemy import func, select

from memoryd.models.db import session_scope
from memoryd.models.tables import ExtractionBatch, Turn
from memoryd.recall import backfill
from memoryd.settings import Settings


def pipeline_stats(settings: Settings) -> dict[str, Any]:
    with session_scope(settings, readonly=True) as session:
        turns = dict(session.execute(select(Turn.status, func.count()).group_by(Turn.status)).all())
        batches = dict(
            session.execute(
                select(ExtractionBatch.status, func.count()).group_by(ExtractionBatch.status)
            ).all()
        )
        totals = session.execute(
            select(
                func.coalesce(func.sum(ExtractionBatch.tokens_in), 0),
                func.coalesce(func.sum(ExtractionBatch.tokens_out), 0),
                func.coalesce(func.sum(ExtractionBatch.llm_calls), 0),
                func.coalesce(func.sum(ExtractionBatch.facts_proposed), 0),
                func.coalesce(func.sum(ExtractionBatch.facts_accepted), 0),
                func.max(ExtractionBatch.finished_at),
            )
        ).one()
        vectors = backfill.coverage(settings, session) if settings.embeddings_on else None
        rejections: Counter[str] = Counter()
        for (reasons,) in session.execute(
            select(ExtractionBatch.rejections).where(ExtractionBatch.rejections.is_not(None))
        ):
            rejections.update(reasons or {})
    return {
        "turns": turns,
        "batches": batches,
        "tokens_in": int(totals[0]),
        "tokens_out": int(totals[1]),
        "llm_calls": int(totals[2]),
        "facts_proposed": int(totals[3]),
        "facts_accepted": int(totals[4]),
        "rejections": dict(rejections),
        "last_batch_at": totals[5].isoformat() if totals[5] else None,
        # Active memories with a vector, waiting for one, refused by the endpoint for good.
        "embeddings": asdict(vectors) if vectors else None,
    }
