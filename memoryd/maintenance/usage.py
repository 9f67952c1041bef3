"""Folding what recall used into the memories: recall only appends a usage row per memory
it returned (recall/usage.py) and locks or changes nothing; here the rows not yet folded,
oldest first, are applied to their memories as each retrieval would have been at its
own time: the weight decayed to that moment and reinforced by reinforce_retrieved, one
more access, the last access time, a short-term memory's TTL restarted from it, and
promotable_at set by the retrieval that reached promote_access_count.

The sweep folds every sweep_interval_seconds and the maintenance cycle folds before it
promotes, expires or archives, so those steps see every recall made before them. Rows
are read through the partial index of unfolded rows, so a fold costs the recalls made
since the last one; the memories are locked in id order like every writer of many
memories, then the usage rows, re-read under their locks: two folds never apply one row
twice (on SQLite writers are serialised).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select, text, update
from sqlalchemy.orm import Session

from memoryd.memories.feedback import locked_feedback
from memoryd.memories.weights import reinforced, restarted_ttl
from memoryd.models.bulk import write_rows
from memoryd.models.db import session_scope
from memoryd.models.dialect import for_update
from memoryd.models.tables import Memory, MemoryUsage, Tier
from memoryd.settings import MemorySettings, Settings

FOLD_CHUNK = 5000  # usage rows per transaction
MAX_CHUNKS = 100  # a fold applies at most 500k rows; the next one does the rest

_MEMORIES = cast(Table, Memory.__table__)
# The partial index's own predicate, as written: SQLAlchemy would write `folded = 0` on
# SQLite, which SQLite does not match to the index, and the sweep would scan the table.
_UNFOLDED = text("NOT memory_usage.folded")


def fold_usage(settings: Settings) -> int:
    """Fold every unfolded usage row (up to MAX_CHUNKS chunks), a chunk per transaction.
    Returns how many rows were folded."""
    total = 0
    for _ in range(MAX_CHUNKS):
        with session_scope(settings.storage) as session:
            folded = fold_chunk(session, settings.memories)
        total += folded
        if folded < FOLD_CHUNK:
            break
    return total


def fold_chunk(session: Session, settings: MemorySettings, limit: int = FOLD_CHUNK) -> int:
    """Fold the oldest `limit` unfolded usage rows in the caller's transaction.

    Locks in the order every writer takes them: the memories by id, then their usage
    rows (an erasure's delete reaches those through the memories too). The rows are
    re-read under their locks, so rows another fold applied meanwhile are left out."""
    seen = session.execute(
        select(MemoryUsage.id, MemoryUsage.memory_id)
        .where(_UNFOLDED)
        .order_by(MemoryUsage.id)
        .limit(limit)
    ).all()
    if not seen:
        return 0
    memories = locked_feedback(session, {row.memory_id for row in seen})
    relock = select(MemoryUsage.id, MemoryUsage.memory_id, MemoryUsage.created_at).where(
        MemoryUsage.id.in_([row.id for row in seen]), _UNFOLDED
    )
    relock = for_update(session, relock.order_by(MemoryUsage.id), skip_locked=True)
    rows = session.execute(relock).all()
    accesses: dict[int, list[datetime]] = defaultdict(list)
    for row in rows:
        accesses[row.memory_id].append(row.created_at)
    changes = [_folded(settings, m, accesses[m.id]) for m in memories if m.id in accesses]
    if changes:
        columns = {name: [change[name] for change in changes] for name in changes[0]}
        write_rows(session, _MEMORIES, columns, key="id")
    if rows:
        session.execute(
            update(MemoryUsage)
            .where(MemoryUsage.id.in_([row.id for row in rows]))
            .values(folded=True)
        )
    return len(rows)


def _folded(settings: MemorySettings, memory: Any, times: Sequence[datetime]) -> dict[str, Any]:
    """A memory's columns after its retrievals at `times` (oldest first), each applied as
    it would have been when it happened. A later write (a reply that used the memory)
    may have moved the weight's anchor past a retrieval: that one counts from there."""
    weight, weight_at = memory.weight, memory.weight_at
    count, expires_at, promotable_at = memory.access_count, memory.expires_at, memory.promotable_at
    times = sorted(times)  # a row committed late may carry an earlier time than its id says
    for at in times:
        step = reinforced(
            memory.tier, weight, weight_at, settings.reinforce_retrieved, max(at, weight_at),
            settings,
        )  # fmt: skip
        weight, weight_at = step["weight"], step["weight_at"]
        count += 1
        expires_at = restarted_ttl(memory.tier, expires_at, at, settings)
        if promotable_at is None and memory.tier == Tier.SHORT:
            promotable_at = at if count >= settings.promote_access_count else None
    return {
        "id": memory.id,
        "weight": weight,
        "weight_at": weight_at,
        "last_accessed_at": max(memory.last_accessed_at or times[-1], times[-1]),
        "expires_at": expires_at,
        "access_count": count,
        "promotable_at": promotable_at,
    }
