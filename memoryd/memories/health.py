"""Memory health figures (seed 004 §6.2) in one call, for a scope or the whole store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import astuple
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from memoryd.memories.review import EXPIRING_WINDOW
from memoryd.models.base import written_in
from memoryd.models.keys import Scope
from memoryd.models.tables import ExtractionBatch, Memory, MemoryStatus, Tier, Turn, TurnStatus
from memoryd.models.tallies import memory_tallies


class MemoryHealth(BaseModel):
    by_tier: dict[str, int]
    by_status: dict[str, int]
    by_category: dict[str, int]
    active: int
    average_confidence: float | None
    expiring_soon: int  # short-tier memories whose TTL ends within a day
    conflicts_resolved: int  # superseded memories
    failed_turns: int
    pending_turns: int
    last_batch_at: datetime | None


LAST_BATCHES = 100

# The statuses with a partial index of their own: counting them never reads every turn.
INDEXED_TURN_STATUSES = (TurnStatus.PENDING, TurnStatus.CLAIMED, TurnStatus.FAILED)


def count_turns(session: Session, status: TurnStatus, *where: ColumnElement[bool]) -> int:
    """Turns with one of INDEXED_TURN_STATUSES (and `where`), through its partial index."""
    is_status = Turn.status == written_in(str(status))
    query = select(func.count()).select_from(Turn).where(is_status, *where)
    return int(session.scalar(query) or 0)


def _grouped(
    session: Session, mem_scope: list[Any]
) -> tuple[Counter[str], Counter[str], Counter[str], float]:
    """Memories by status, active ones by tier and by category, and the active ones'
    summed confidence: a scope's in one grouped pass through its index, the whole
    store's from its tallies (a pass over every memory per view cost what is stored)."""
    groups: Sequence[Any]
    if mem_scope:
        groups = session.execute(
            select(
                Memory.status,
                Memory.tier,
                Memory.category,
                func.count(),
                func.sum(Memory.confidence),
            )
            .where(*mem_scope)
            .group_by(Memory.status, Memory.tier, Memory.category)
        ).all()
    else:
        groups = [astuple(t) for t in memory_tallies(session)]
    by_status: Counter[str] = Counter()
    by_tier: Counter[str] = Counter()
    by_category: Counter[str] = Counter()
    confidence = 0.0
    for status, tier, category, n, summed in groups:
        by_status[str(status)] += n
        if status == MemoryStatus.ACTIVE:
            by_tier[str(tier)] += n
            by_category[str(category)] += n
            confidence += summed or 0.0
    return by_status, by_tier, by_category, confidence


def memory_health(session: Session, now: datetime, scope: Scope | None = None) -> MemoryHealth:
    """One grouped pass over the memories (the scope's through its index), dead letters
    and waiting turns counted through their partial indexes: never every turn."""
    mem_scope: list[Any] = []
    turn_scope: list[Any] = []
    batch_scope: list[Any] = []
    if scope is not None:
        mem_scope = [Memory.of(scope)]
        turn_scope = [Turn.of(scope)]
        batch_scope = [ExtractionBatch.of(scope)]
    by_status, by_tier, by_category, confidence = _grouped(session, mem_scope)
    active = by_status[MemoryStatus.ACTIVE]

    return MemoryHealth(
        by_tier=dict(by_tier),
        by_status=dict(by_status),
        by_category=dict(by_category),
        active=active,
        # Shown as 0.925, not the sum's 0.9249999999999999.
        average_confidence=round(confidence / active, 4) if active else None,
        expiring_soon=int(
            session.scalar(
                select(func.count()).where(
                    *mem_scope,
                    Memory.status == written_in(MemoryStatus.ACTIVE),
                    Memory.tier == written_in(Tier.SHORT),
                    Memory.expires_at <= now + EXPIRING_WINDOW,
                )
            )
            or 0
        ),
        conflicts_resolved=by_status[MemoryStatus.SUPERSEDED],
        failed_turns=count_turns(session, TurnStatus.FAILED, *turn_scope),
        pending_turns=count_turns(session, TurnStatus.PENDING, *turn_scope)
        + count_turns(session, TurnStatus.CLAIMED, *turn_scope),
        last_batch_at=_last_batch_at(session, batch_scope),
    )


def _last_batch_at(session: Session, batch_scope: list[Any]) -> datetime | None:
    """When the last batch finished, read from the newest LAST_BATCHES batches (a
    scope's through its index), not every batch kept: a batch finishes after at most
    that many started after it."""
    newest = (
        select(ExtractionBatch.finished_at)
        .where(*batch_scope)
        .order_by(ExtractionBatch.id.desc())
        .limit(LAST_BATCHES)
        .subquery()
    )
    last: datetime | None = session.scalar(select(func.max(newest.c.finished_at)))
    return last
