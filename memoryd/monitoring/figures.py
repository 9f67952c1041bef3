"""Read-only figures over the whole deployment (every worker's work is in the database):
batches, dead letters, the health panel and the figures /metrics exports."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from memoryd.ingest.sweeper import dead_letter_turns
from memoryd.memories.conflicts import OPEN_COUNT_CAP, count_open
from memoryd.memories.health import count_turns, memory_health
from memoryd.models.base import written_in
from memoryd.models.batch_totals import batch_figures
from memoryd.models.db import capped_count
from memoryd.models.schemas import MAX_PAGE
from memoryd.models.tables import ExtractionBatch, Turn, TurnStatus
from memoryd.recall import backfill
from memoryd.settings import Settings

WEEK = timedelta(days=7)


class BatchOut(BaseModel):
    """One extraction attempt, as the batches page and GET /v1/batches show it."""

    id: int
    agent_id: str
    user_id: str
    session_id: str
    kind: str
    status: str
    turn_count: int
    extractor: str | None
    model: str | None
    prompt_version: str | None
    tokens_in: int
    tokens_out: int
    llm_calls: int
    facts_proposed: int
    facts_accepted: int
    facts_rejected: int
    rejections: dict[str, int] | None
    memories_created: int
    memories_confirmed: int
    memories_superseded: int
    started_at: datetime
    finished_at: datetime | None
    duration_ms: float | None
    error: str | None
    error_kind: str | None


class DeadLetter(BaseModel):
    """A dead-lettered turn: kept, re-drivable, with the error of its last batch."""

    turn_id: int
    agent_id: str
    user_id: str
    session_id: str
    role: str
    content: str  # the first 300 characters
    attempts: int
    created_at: datetime
    error: str | None


class HealthPanel(BaseModel):
    """Seed 004 §6.2, plus the pipeline's backlog and spend."""

    memories: int
    average_confidence: float | None
    expiring_soon: int
    conflicts: int
    conflicts_more: bool  # the count stopped at conflicts.OPEN_COUNT_CAP: "1000+"
    pending_turns: int
    dead_letters: int
    tokens_this_week: int
    # Only when embeddings are on: memories waiting for a vector, and those the
    # endpoint refused embedding_max_attempts times (left out until edited).
    unembedded: int | None = None
    embedding_refused: int | None = None


def list_batches(
    session: Session,
    *,
    status: str | None = None,
    agent_id: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[BatchOut]:
    """Newest first; `before_id` (the API) or `offset` (the page) pages back."""
    stmt = _batches(status, agent_id)
    if before_id:
        stmt = stmt.where(ExtractionBatch.id < before_id)
    stmt = stmt.order_by(ExtractionBatch.id.desc()).limit(min(max(limit, 1), MAX_PAGE))
    stmt = stmt.offset(offset)
    return [
        BatchOut.model_validate({name: getattr(b, name) for name in BatchOut.model_fields})
        for b in session.scalars(stmt)
    ]


def count_batches(session: Session, *, status: str | None = None, cap: int) -> int:
    """How many batches `list_batches` pages through, at most `cap`."""
    return capped_count(session, _batches(status, None).with_only_columns(ExtractionBatch.id), cap)


def _batches(status: str | None, agent_id: str | None) -> Select[ExtractionBatch]:
    stmt = select(ExtractionBatch).where(*ExtractionBatch.matching(agent_id, None))
    return stmt.where(ExtractionBatch.status == status) if status else stmt


def count_dead_letters(session: Session, *, cap: int) -> int:
    """Every dead-lettered turn, at most `cap`."""
    return capped_count(session, select(Turn.id).where(*dead_letter_turns(None, None, None)), cap)


def dead_letters(
    session: Session,
    *,
    agent_id: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[DeadLetter]:
    stmt = (
        select(Turn, ExtractionBatch.error)
        .outerjoin(ExtractionBatch, ExtractionBatch.id == Turn.batch_id)
        .where(*dead_letter_turns(agent_id, user_id, session_id))
        .order_by(Turn.id)
        .limit(min(max(limit, 1), MAX_PAGE))
        .offset(offset)
    )
    return [
        DeadLetter(
            turn_id=turn.id,
            agent_id=turn.agent_id,
            user_id=turn.user_id,
            session_id=turn.session_id,
            role=turn.role,
            content=turn.content[:300],
            attempts=turn.attempts,
            created_at=turn.created_at,
            error=error,
        )
        for turn, error in session.execute(stmt)
    ]


def tokens_since(session: Session, since: datetime) -> int:
    total = session.scalar(
        select(
            func.coalesce(func.sum(ExtractionBatch.tokens_in + ExtractionBatch.tokens_out), 0)
        ).where(ExtractionBatch.started_at >= since)
    )
    return int(total or 0)


def health_panel(session: Session, settings: Settings, now: datetime) -> HealthPanel:
    health = memory_health(session, now)
    conflicts = count_open(session)
    vectors = (
        backfill.coverage(settings, session, embedded=False) if settings.embeddings_on else None
    )
    return HealthPanel(
        # Another model's vector waits for this model's as much as no vector does.
        unembedded=vectors.waiting + vectors.other_model if vectors else None,
        embedding_refused=vectors.refused if vectors else None,
        memories=health.active,
        average_confidence=health.average_confidence,
        expiring_soon=health.expiring_soon,
        conflicts=conflicts,
        conflicts_more=conflicts >= OPEN_COUNT_CAP,
        pending_turns=health.pending_turns,
        dead_letters=health.failed_turns,
        tokens_this_week=tokens_since(session, now - WEEK),
    )


class PipelineFigures(BaseModel):
    """What /metrics exports from the database, for every process of the deployment."""

    batches: dict[str, dict[str, int]]  # kind ("extract", "compress") -> status -> batches
    llm_calls: dict[str, int]  # by kind
    tokens_in: dict[str, int]  # by kind
    tokens_out: dict[str, int]  # by kind
    pending_turns: int
    dead_letters: int
    oldest_pending_seconds: float


def pipeline_figures(session: Session, now: datetime) -> PipelineFigures:
    # Removed batches included: counters never go back.
    batches = batch_figures(session, rejections=False)

    # Since memoryd received it, not since the sender's timestamp (an import's turns
    # were said long before they waited): one end of ix_turns_pending_received.
    oldest = session.scalar(
        select(func.min(Turn.received_at)).where(Turn.status == written_in(TurnStatus.PENDING))
    )
    return PipelineFigures(
        batches={kind: dict(f.by_status) for kind, f in batches.kinds.items()},
        llm_calls={kind: f.llm_calls for kind, f in batches.kinds.items()},
        tokens_in={kind: f.tokens_in for kind, f in batches.kinds.items()},
        tokens_out={kind: f.tokens_out for kind, f in batches.kinds.items()},
        pending_turns=count_turns(session, TurnStatus.PENDING)
        + count_turns(session, TurnStatus.CLAIMED),
        dead_letters=count_turns(session, TurnStatus.FAILED),
        oldest_pending_seconds=max((now - oldest).total_seconds(), 0.0) if oldest else 0.0,
    )
