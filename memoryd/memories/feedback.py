"""What a memory's weight and access columns are recomputed from, read under the rows'
locks: by the fold of recalls' usage rows (maintenance/usage.py) and when a reply used
a memory (recall/usage.py). Every new value is computed from what was read under the
lock, so a concurrent change is never lost or overwritten."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from memoryd.models.dialect import for_update
from memoryd.models.tables import Memory

FEEDBACK_COLUMNS = (
    Memory.tier,
    Memory.weight,
    Memory.weight_at,
    Memory.expires_at,
    Memory.access_count,
    Memory.promotable_at,
    Memory.last_accessed_at,
)
_FRESH = (
    select(Memory.id, *FEEDBACK_COLUMNS)
    .where(Memory.id.in_(bindparam("ids", expanding=True)))
    .order_by(Memory.id)
)


def locked_feedback(session: Session, ids: Iterable[int]) -> Sequence[Any]:
    """The memories' id and FEEDBACK_COLUMNS, re-read under their row locks, taken in id
    order (so concurrent writers of many memories queue instead of deadlocking). Only
    unkeyed columns change: a recall's usage rows, whose foreign key check needs KEY
    SHARE on these memories, are never held up by a fold."""
    locked = for_update(session, _FRESH, keys_kept=True)
    return session.connection().execute(locked, {"ids": sorted(set(ids))}).all()
