"""Memory health figures (seed 004 §6.2) in one call, for a scope or the whole store."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memoryd.memories.review import EXPIRING_WINDOW
from memoryd.models.keys import Scope
from memoryd.models.tables import ExtractionBatch, Memory, MemoryStatus, Tier, Turn, TurnStatus


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


def memory_health(session: Session, now: datetime, scope: Scope | None = None) -> MemoryHealth:
    mem_scope: list[Any] = []
    turn_scope: list[Any] = []
    batch_scope: list[Any] = []
    if scope is not None:
        mem_scope = [Memory.agent_id == scope.agent_id, Memory.user_id == scope.user_id]
        turn_scope = [Turn.agent_id == scope.agent_id, Turn.user_id == scope.user_id]
        batch_scope = [
            ExtractionBatch.agent_id == scope.agent_id,
            ExtractionBatch.user_id == scope.user_id,
        ]
    active = [*mem_scope, Memory.status == MemoryStatus.ACTIVE]

    def grouped(column: Any, *where: Any) -> dict[str, int]:
        rows = session.execute(select(column, func.count()).where(*where).group_by(column))
        return {str(k): int(v) for k, v in rows}

    by_status = grouped(Memory.status, *mem_scope)
    turns = grouped(Turn.status, *turn_scope)
    return MemoryHealth(
        by_tier=grouped(Memory.tier, *active),
        by_status=by_status,
        by_category=grouped(Memory.category, *active),
        active=by_status.get(MemoryStatus.ACTIVE, 0),
        average_confidence=session.scalar(select(func.avg(Memory.confidence)).where(*active)),
        expiring_soon=int(
            session.scalar(
                select(func.count()).where(
                    *active, Memory.tier == Tier.SHORT, Memory.expires_at <= now + EXPIRING_WINDOW
                )
            )
            or 0
        ),
        conflicts_resolved=by_status.get(MemoryStatus.SUPERSEDED, 0),
        failed_turns=turns.get(TurnStatus.FAILED, 0),
        pending_turns=turns.get(TurnStatus.PENDING, 0) + turns.get(TurnStatus.CLAIMED, 0),
        last_batch_at=session.scalar(
            select(func.max(ExtractionBatch.finished_at)).where(*batch_scope)
        ),
    )
