"""Keeping the store healthy: promotion, expiry and archiving of decayed memories.

Decay itself writes nothing (see weights.py); these steps change only the rows whose
state is due to change, found through partial indexes, in bounded chunks, each chunk
its own short transaction. Two runs at once cannot change a row twice: on PostgreSQL
each chunk locks its rows with SKIP LOCKED and re-checks the condition in the UPDATE;
on SQLite writers are serialised by the database lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from memoryd.maintenance.retention import Step, retention_steps
from memoryd.maintenance.statistics import analyze_due
from memoryd.maintenance.usage import fold_usage
from memoryd.memories.erasure import resume_interrupted
from memoryd.memories.weights import archive_due, decayed, half_life_days
from memoryd.models import key_index, tallies
from memoryd.models.base import written_in
from memoryd.models.db import checkpoint_sqlite, session_scope, utcnow
from memoryd.models.dialect import for_update
from memoryd.models.tables import Actor, EventKind, Memory, MemoryEvent, MemoryStatus, Tier
from memoryd.settings import MemorySettings, Settings

log = logging.getLogger(__name__)

CHUNK = 5000
MAX_CHUNKS_PER_RUN = 100  # a run changes at most 500k rows; the next run does the rest


@dataclass
class CycleCounts:
    usage_folded: int = 0  # recalls' usage rows folded into their memories (usage.py)
    promoted: int = 0
    expired: int = 0
    archived: int = 0
    purged: int = 0  # deleted memories past deleted_retention_days
    archived_purged: int = 0  # archived memories past archived_retention_days
    turns_purged: int = 0
    usage_purged: int = 0
    batches_purged: int = 0
    erasures_resumed: int = 0
    tallies_folded: int = 0  # changes to the memory tallies folded (models/tallies.py)
    keys_folded: int = 0  # changes to the subject key index folded (models/key_index.py)
    tables_analyzed: int = 0  # PostgreSQL tables given fresh statistics (statistics.py)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _record(
    session: Session, rows: list[Any], kind: EventKind, now: datetime, detail: dict[str, Any]
) -> None:
    if rows:
        session.execute(
            insert(MemoryEvent),
            [
                {
                    "memory_id": r.id,
                    "agent_id": r.agent_id,
                    "user_id": r.user_id,
                    "kind": kind,
                    "actor": Actor.MAINTENANCE,
                    "after_content": r.content,
                    "detail": detail,
                    "created_at": now,
                }
                for r in rows
            ],
        )


def promote_due(
    session: Session, settings: MemorySettings, now: datetime, limit: int = CHUNK
) -> int:
    """Short-tier memories retrieved `promote_access_count` times move to the long tier.
    The retrieval that reaches the count sets promotable_at, which this reads by index."""
    due = session.execute(
        for_update(
            session,
            select(
                Memory.id,
                Memory.agent_id,
                Memory.user_id,
                Memory.content,
                Memory.weight,
                Memory.weight_at,
            )
            .where(
                Memory.tier == written_in(Tier.SHORT),
                Memory.status == written_in(MemoryStatus.ACTIVE),
                Memory.promotable_at.is_not(None),
                Memory.access_count >= settings.promote_access_count,
            )
            .order_by(Memory.promotable_at, Memory.id)
            .limit(limit),
            skip_locked=True,
        )
    ).all()
    if not due:
        return 0
    session.execute(update(Memory), [_promoted(row, settings, now) for row in due])
    _record(
        session,
        list(due),
        EventKind.PROMOTED,
        now,
        {"reason": f"retrieved {settings.promote_access_count}+ times"},
    )
    return len(due)


def _promoted(row: Any, settings: MemorySettings, now: datetime) -> dict[str, Any]:
    """A promoted memory's new values: long tier, no expiry, its weight decayed so far
    at the short tier's pace and decaying at the long tier's from now on."""
    weight = decayed(row.weight, row.weight_at, now, half_life_days(Tier.SHORT, settings))
    return {
        "id": row.id,
        "tier": Tier.LONG,
        "expires_at": None,
        "updated_at": now,
        "weight": weight,
        "weight_at": now,
        "archive_due_at": archive_due(weight, now, Tier.LONG, settings),
    }


def _retire(
    session: Session,
    ids: Sequence[int],
    status: MemoryStatus,
    kind: EventKind,
    now: datetime,
    extra: dict[str, Any],
    detail: dict[str, Any],
) -> int:
    if not ids:
        return 0
    rows = session.execute(
        update(Memory)
        .where(Memory.id.in_(ids), Memory.status == MemoryStatus.ACTIVE)
        .values(status=status, updated_at=now, **extra)
        .returning(Memory.id, Memory.agent_id, Memory.user_id, Memory.content)
    ).all()
    _record(session, list(rows), kind, now, detail)
    return len(rows)


def expire_due(
    session: Session, settings: MemorySettings, now: datetime, limit: int = CHUNK
) -> int:
    """Short-tier memories past their TTL (restarted on every access) become expired."""
    due = (
        select(Memory.id)
        .where(
            Memory.tier == written_in(Tier.SHORT),
            Memory.status == written_in(MemoryStatus.ACTIVE),
            Memory.expires_at <= now,
        )
        .order_by(Memory.expires_at)
        .limit(limit)
    )
    ids = session.scalars(for_update(session, due, skip_locked=True)).all()
    return _retire(
        session, ids, MemoryStatus.EXPIRED, EventKind.EXPIRED, now, {}, {"reason": "ttl"}
    )


def _archive_chunk(
    session: Session, settings: MemorySettings, now: datetime, limit: int
) -> tuple[int, int]:
    """(archived, rows read). archive_due_at is a lower bound (recall's reinforcement
    postpones the moment without writing it): a due row is archived only if its weight
    says so, and otherwise gets its true due time, so it is read once more at most."""
    due = session.execute(
        for_update(
            session,
            select(Memory.id, Memory.weight, Memory.weight_at)
            .where(
                Memory.tier == written_in(Tier.LONG),
                Memory.status == written_in(MemoryStatus.ACTIVE),
                Memory.archive_due_at <= now,
            )
            .order_by(Memory.archive_due_at, Memory.id)
            .limit(limit),
            skip_locked=True,
        )
    ).all()
    postponed, decayed_ids = [], []
    for r in due:
        at = archive_due(r.weight, r.weight_at, Tier.LONG, settings)
        if at is not None and at > now:
            postponed.append({"id": r.id, "archive_due_at": at})
        else:
            decayed_ids.append(r.id)
    if postponed:
        session.execute(update(Memory), postponed)
    archived = _retire(
        session,
        decayed_ids,
        MemoryStatus.ARCHIVED,
        EventKind.ARCHIVED,
        now,
        {"archived_at": now},
        {"reason": "weight below archive_threshold"},
    )
    return archived, len(due)


# (rows counted, rows read): a run goes on while a chunk reads all it may.
ChunkStep = Callable[[Session, MemorySettings, datetime, int], tuple[int, int]]


def _counted(step: Step) -> ChunkStep:
    def chunk_step(
        session: Session, settings: MemorySettings, now: datetime, limit: int
    ) -> tuple[int, int]:
        changed = step(session, settings, now, limit)
        return changed, changed

    return chunk_step


def _run_step(settings: Settings, step: ChunkStep, now: datetime, chunk: int) -> int:
    total = 0
    for _ in range(MAX_CHUNKS_PER_RUN):
        with session_scope(settings.storage) as session:
            counted, read = step(session, settings.memories, now, chunk)
        total += counted
        if read < chunk:
            break
    return total


def _fold_tallies(session: Session, settings: MemorySettings, now: datetime, limit: int) -> int:
    return tallies.fold(session, limit)


def _fold_keys(session: Session, settings: MemorySettings, now: datetime, limit: int) -> int:
    return key_index.fold(session, limit)


def _fold_usage(settings: Settings) -> int:
    """Recalls' usage folded first; a fold that fails (a lock wait past its timeout) only
    leaves this cycle's steps to work from the counts as they stand, as before it."""
    try:
        return fold_usage(settings)
    except DBAPIError as exc:
        log.warning("folding recalls' usage failed, the cycle goes on: %s", type(exc).__name__)
        return 0


def run_cycle(settings: Settings, now: datetime | None = None, chunk: int = CHUNK) -> CycleCounts:
    """One maintenance cycle. Recalls' usage is folded first, so the steps after it see
    every retrieval made before the cycle; promotion runs next, so a memory used often
    is kept even if its TTL ran out in the same interval."""
    now = now or utcnow()
    retention = retention_steps()  # this run's: their walks of old ranges start afresh
    counts = CycleCounts(
        usage_folded=_fold_usage(settings),
        promoted=_run_step(settings, _counted(promote_due), now, chunk),
        expired=_run_step(settings, _counted(expire_due), now, chunk),
        archived=_run_step(settings, _archive_chunk, now, chunk),
        **{
            name: _run_step(settings, _counted(step), now, chunk)
            for name, step in retention.items()
        },
        erasures_resumed=resume_interrupted(settings, now),
        tallies_folded=_run_step(settings, _counted(_fold_tallies), now, chunk),
        keys_folded=_run_step(settings, _counted(_fold_keys), now, chunk),
        tables_analyzed=analyze_due(settings.storage),  # last: sees what the steps changed
    )
    if any(getattr(counts, name) for name in retention):
        checkpoint_sqlite(settings.storage)  # purged text leaves the WAL too (erasure does its own)
    log.info("maintenance cycle: %s", counts.as_dict())
    return counts
