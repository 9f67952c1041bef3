"""Conflicts: replacements (a superseded memory and the one that replaced it) that no
person has reviewed yet. Keeping the new side records the review; keeping the old side
brings it back and retires the new one, history kept either way."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from memoryd.errors import InvalidState, NotFound
from memoryd.memories.store import record_event, supersede_memory
from memoryd.memories.weights import INITIAL_WEIGHT, set_weight
from memoryd.models.base import written_in
from memoryd.models.coordination import lock_scope
from memoryd.models.dialect import for_update
from memoryd.models.keys import Scope
from memoryd.models.schemas import MemoryOut
from memoryd.models.tables import (
    Actor,
    ConflictReview,
    EventKind,
    Memory,
    MemoryStatus,
)
from memoryd.settings import MemorySettings


class Conflict(BaseModel):
    old: MemoryOut  # superseded
    new: MemoryOut  # what replaced it


SUPERSEDED = str(MemoryStatus.SUPERSEDED)


def _open_pairs() -> Any:  # Select of (superseded, replacement)
    new = aliased(Memory)
    reviewed = select(ConflictReview.memory_id).where(
        ConflictReview.memory_id == Memory.id,
        ConflictReview.superseded_by_id == Memory.superseded_by_id,
    )
    return (
        select(Memory, new)
        .join(new, new.id == Memory.superseded_by_id)
        .where(Memory.status == written_in(SUPERSEDED), ~reviewed.exists())
    )


def open_conflicts(session: Session, limit: int = 50, offset: int = 0) -> list[Conflict]:
    newest_first = _open_pairs().order_by(Memory.updated_at.desc(), Memory.id.desc())
    rows = session.execute(newest_first.limit(limit).offset(offset))
    return [
        Conflict(old=MemoryOut.from_memory(old), new=MemoryOut.from_memory(new))
        for old, new in rows
    ]


# The panel shows "1000+" past this: counting stops there, so a store with years of
# unreviewed replacements costs no more to show than one with a thousand.
OPEN_COUNT_CAP = 1000


def count_open(session: Session, cap: int = OPEN_COUNT_CAP) -> int:
    """Open conflicts, at most `cap`: exactly the pairs the list shows, read through the
    partial index of superseded memories."""
    first = _open_pairs().with_only_columns(Memory.id).limit(cap).subquery()
    return int(session.scalar(select(func.count()).select_from(first)) or 0)


def _locked_pair(session: Session, old_id: int) -> tuple[Memory, Memory]:
    """A superseded memory and the one that superseded it, both locked in one statement
    by ascending id: the order every path locks memories in."""
    old = session.get(Memory, old_id)
    if old is None or old.status != MemoryStatus.SUPERSEDED or old.superseded_by_id is None:
        raise NotFound.keyed("conflict.missing", id=old_id)
    pair = for_update(
        session,
        select(Memory)
        .where(Memory.id.in_([old_id, old.superseded_by_id]))
        .order_by(Memory.id)
        .execution_options(populate_existing=True),
    )
    by_id = {m.id: m for m in session.scalars(pair)}
    old = by_id[old_id]
    if old.status != MemoryStatus.SUPERSEDED or old.superseded_by_id not in by_id:
        raise NotFound.keyed("conflict.missing", id=old_id)
    return old, by_id[old.superseded_by_id]


def resolve(
    session: Session,
    settings: MemorySettings,
    old_id: int,
    keep: Literal["old", "new"],
    now: datetime,
) -> Conflict:
    """Keep one side of the replacement of `old_id`; the pair leaves the conflicts list."""
    scope = session.execute(select(Memory.agent_id, Memory.user_id).where(Memory.id == old_id))
    row = scope.first()
    if row is not None:
        lock_scope(session, Scope(row.agent_id, row.user_id))
    old, new = _locked_pair(session, old_id)
    if session.get(ConflictReview, (old.id, new.id)) is not None:
        return Conflict(old=MemoryOut.from_memory(old), new=MemoryOut.from_memory(new))
    if keep == "old":
        if new.status != MemoryStatus.ACTIVE:
            raise InvalidState.keyed("conflict.side_not_active", id=new.id, status=new.status)
        old.status = MemoryStatus.ACTIVE
        old.superseded_by_id = None
        old.updated_at = now
        set_weight(old, INITIAL_WEIGHT, now, settings)
        record_event(session, old, EventKind.RESTORED, Actor.API, now, detail={"kept_over": new.id})
        supersede_memory(session, new, old, now, actor=Actor.API)
        # The swapped pair (new superseded by old) was decided by this same review.
        session.add(
            ConflictReview(
                memory_id=new.id, superseded_by_id=old.id, kept_id=old.id, reviewed_at=now
            )
        )
    kept = old if keep == "old" else new
    session.add(
        ConflictReview(memory_id=old.id, superseded_by_id=new.id, kept_id=kept.id, reviewed_at=now)
    )
    session.flush()
    return Conflict(old=MemoryOut.from_memory(old), new=MemoryOut.from_memory(new))
