"""The review queue: short-tier memories the extractor was not sure of. A person approves
one (it is promoted to the long tier) or declines it (soft-deleted, restorable). Also the
health panel's clean-up of memories about to expire."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from memoryd.errors import InvalidState, NotFound
from memoryd.memories import edits
from memoryd.memories.store import promote_memory, record_event
from memoryd.models.base import written_in
from memoryd.models.coordination import lock_scope
from memoryd.models.db import capped_count
from memoryd.models.dialect import for_update
from memoryd.models.keys import Scope
from memoryd.models.schemas import MemoryOut
from memoryd.models.tables import Actor, EventKind, Memory, MemoryStatus, Tier
from memoryd.settings import ExtractionSettings, Settings

EXPIRING_WINDOW = timedelta(days=1)
MAX_CLEAN_UP = 5000


def review_queue(
    session: Session, settings: ExtractionSettings, limit: int = 50, offset: int = 0
) -> list[MemoryOut]:
    """Active short-tier memories under the long-term confidence, least sure first."""
    stmt = _queue(settings).order_by(Memory.confidence, Memory.id).limit(limit).offset(offset)
    return [MemoryOut.from_memory(m) for m in session.scalars(stmt)]


def count_queue(session: Session, settings: ExtractionSettings, cap: int) -> int:
    """The review queue's length, at most `cap` (models.db.capped_count)."""
    return capped_count(session, _queue(settings).with_only_columns(Memory.id), cap)


def _queue(settings: ExtractionSettings) -> Select[Memory]:
    return select(Memory).where(
        Memory.status == written_in(MemoryStatus.ACTIVE),
        Memory.tier == written_in(Tier.SHORT),
        Memory.confidence < settings.long_term_confidence,
    )


def _scope_of(session: Session, memory_id: int) -> Scope:
    row = session.execute(
        select(Memory.agent_id, Memory.user_id).where(Memory.id == memory_id)
    ).first()
    if row is None:
        raise NotFound.keyed("memory.missing", id=memory_id)
    return Scope(row.agent_id, row.user_id)


def approve(session: Session, settings: Settings, memory_id: int, now: datetime) -> MemoryOut:
    """A person vouches for it: long tier, confidence raised to the long-term level."""
    lock_scope(session, _scope_of(session, memory_id))
    memory = session.scalars(
        for_update(session, select(Memory).where(Memory.id == memory_id))
    ).one()
    if memory.status != MemoryStatus.ACTIVE:
        raise InvalidState.keyed("memory.not_active", id=memory_id, status=memory.status)
    memory.confidence = max(memory.confidence, settings.extraction.long_term_confidence)
    if memory.tier == Tier.SHORT:
        promote_memory(session, settings.memories, memory, now, actor=Actor.API, reason="approved")
    session.flush()
    return MemoryOut.from_memory(memory)


def decline(session: Session, memory_id: int, now: datetime) -> MemoryOut:
    """Not worth keeping: soft-deleted like any deletion (restorable, history kept)."""
    # An admin action on the memory in hand, a shared one included.
    return edits.forget(session, _scope_of(session, memory_id), memory_id, now, shared=True)


def expire_soon(session: Session, now: datetime, window: timedelta = EXPIRING_WINDOW) -> int:
    """The health panel's clean-up: short-tier memories whose TTL ends within `window`
    expire now instead of at the next maintenance run. A memory a writer holds is left
    for that run rather than waited for."""
    rows = session.scalars(
        for_update(
            session,
            select(Memory)
            .where(
                Memory.status == written_in(MemoryStatus.ACTIVE),
                Memory.tier == written_in(Tier.SHORT),
                Memory.expires_at <= now + window,
            )
            .order_by(Memory.id)
            .limit(MAX_CLEAN_UP),
            skip_locked=True,
        )
    ).all()
    for memory in rows:
        memory.status = MemoryStatus.EXPIRED
        memory.updated_at = now
        record_event(
            session, memory, EventKind.EXPIRED, Actor.API, now, detail={"reason": "clean-up"}
        )
    session.flush()
    return len(rows)
