"""Retention: what the store no longer needs goes, each cycle, in chunks.

- Turns extracted (done) or given up on (skipped) more than `turn_retention_days` ago,
  once compression has summarised them or their session has been idle as long: memories
  and summaries keep what they said. Pending, claimed and dead-lettered turns stay. A
  session idle that long whose last turns went goes with them, summaries included.
- Usage rows older than `usage_retention_days`: each memory's counters (access count,
  last access, weight) took what promotion and ranking need when the recall happened.
- Extraction batches finished more than `batch_retention_days` ago, except those whose
  error a dead-lettered turn still shows; their figures are added to the pipeline's
  totals first (memoryd/models/batch_totals.py).
- Memories deleted (`forget`) more than `deleted_retention_days` ago, and memories
  archived more than `archived_retention_days` ago, with their events and usage (foreign
  keys' cascades; their search postings went when they left the active status), each
  read through its partial index (of deleted, of archived memories).

The others are read oldest first by primary key below the first row younger than its
cutoff, so a run reads the rows it removes and the old ones it keeps (dead letters and
their batches, turns of a session still being summarised), never the rest of the table;
each chunk of a run reads on from where the last one stopped (OldRange), so the rows
kept are read once a run, not once a chunk. 0 days keeps everything of that kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, exists, func, or_, select, true
from sqlalchemy.orm import InstrumentedAttribute, Session

from memoryd.models import batch_totals
from memoryd.models.base import written_in
from memoryd.models.db import rowcount
from memoryd.models.keys import SessionKey, session_pk, turn_session, turns_of
from memoryd.models.tables import (
    BatchStatus,
    ChatSession,
    ExtractionBatch,
    Memory,
    MemoryStatus,
    MemoryUsage,
    SessionSegment,
    Turn,
    TurnStatus,
)
from memoryd.settings import MemorySettings


@dataclass
class OldRange:
    """How far one run has walked a table's old range: the first young id, probed once
    a run (its cutoff stays put), and the last id a chunk read, which the next chunk
    reads on from. A step called without one walks afresh."""

    bound: int | None = None
    probed: bool = False
    after: int = 0


def _oldest(
    session: Session,
    table: Any,
    born: Any,
    removable: ColumnElement[bool],
    cutoff: datetime,
    limit: int,
    *extra: Any,
    join: tuple[Any, ColumnElement[bool]] | None = None,
    stamped: Any = None,
    walk: OldRange | None = None,
) -> list[Any]:
    """Up to `limit` of the table's oldest rows by id born before `cutoff` that
    `removable` says may go, with `extra` columns. `stamped` (`born` by default) is when
    memoryd stored the row, which grows with its id: the old rows are those below the
    first one stamped since the cutoff (_first_young_id), and the database reads that
    range by primary key, from where `walk` stopped up to the `limit`-th removable row,
    never the rest of the table. However many old rows stay (dead letters), none holds
    back those behind them; a row born before the cutoff but stored since (an import of
    old turns) waits until it was stored that long ago."""
    walk = walk or OldRange()
    if not walk.probed:
        stamp = born if stamped is None else stamped
        walk.bound, walk.probed = _first_young_id(session, table, stamp, cutoff), True
    query = select(table.id, *extra).where(born < cutoff, removable, table.id > walk.after)
    if join is not None:
        query = query.outerjoin(*join)
    if walk.bound is not None:
        query = query.where(table.id < walk.bound)
    rows = list(session.execute(query.order_by(table.id).limit(limit)).all())
    if rows:
        walk.after = rows[-1].id
    return rows


def _first_young_id(session: Session, table: Any, stamped: Any, cutoff: datetime) -> int | None:
    """An id below which every row was stamped before `cutoff` and from which the first
    row was not, found by halving the id range between an old row and a young one (a
    few probes of the primary key, however large the table); None when no row is that
    young. A row gone meanwhile (an erasure) counts as young: the run then stops
    earlier, and the next run goes on."""

    def young_from(least: int) -> tuple[int, bool] | None:
        ordered = select(table.id, stamped).where(table.id >= least).order_by(table.id)
        row = session.execute(ordered.limit(1)).first()
        return None if row is None else (int(row[0]), row[1] >= cutoff)

    newest = session.execute(select(table.id, stamped).order_by(table.id.desc()).limit(1)).first()
    if newest is None or newest[1] < cutoff:
        return None
    oldest = young_from(0)
    if oldest is None or oldest[1]:
        return oldest[0] if oldest is not None else int(newest[0])
    old, young = oldest[0], int(newest[0])
    while young - old > 1:  # every row up to `old` is old; the first from `young` is young
        middle = (old + young) // 2
        found = young_from(middle)
        if found is None or found[1]:
            young = middle
        else:
            old = found[0]
    return young


def _removed(session: Session, table: Any, rows: list[Any]) -> int:
    if not rows:
        return 0
    gone = session.execute(delete(table).where(table.id.in_([row.id for row in rows])))
    return rowcount(gone)


def purge_turns(
    session: Session,
    settings: MemorySettings,
    now: datetime,
    limit: int,
    walk: OldRange | None = None,
) -> int:
    if not settings.turn_retention_days:
        return 0
    cutoff = now - timedelta(days=settings.turn_retention_days)
    removable = and_(
        Turn.status.in_([TurnStatus.DONE, TurnStatus.SKIPPED]),
        or_(
            Turn.id <= func.coalesce(ChatSession.summary_upto, 0),
            ChatSession.last_activity_at < cutoff,
            ChatSession.session_id.is_(None),  # its session already went
        ),
    )
    scope = (Turn.agent_id, Turn.user_id, Turn.session_id)
    rows = _oldest(
        session,
        Turn,
        Turn.created_at,
        removable,
        cutoff,
        limit,
        *scope,
        join=(ChatSession, turn_session()),
        stamped=Turn.received_at,  # created_at is the sender's: an import's may be old
        walk=walk,
    )
    removed = _removed(session, Turn, rows)
    _forget_emptied(
        session, {SessionKey(r.agent_id, r.user_id, r.session_id) for r in rows}, cutoff
    )
    return removed


def _forget_emptied(session: Session, keys: set[SessionKey], cutoff: datetime) -> None:
    """Sessions idle since `cutoff` whose last turns just went: their rows and summaries
    go too (a session resumed later starts afresh)."""
    for key in keys:
        left = exists().where(*turns_of(key))
        idle = (*session_pk(key), ChatSession.last_activity_at < cutoff, ~left)
        gone = session.execute(delete(ChatSession).where(*idle))
        if rowcount(gone):
            session.execute(
                delete(SessionSegment).where(
                    SessionSegment.of(key), SessionSegment.session_id == key.session_id
                )
            )


def purge_usage(
    session: Session,
    settings: MemorySettings,
    now: datetime,
    limit: int,
    walk: OldRange | None = None,
) -> int:
    if not settings.usage_retention_days:
        return 0
    cutoff = now - timedelta(days=settings.usage_retention_days)
    rows = _oldest(session, MemoryUsage, MemoryUsage.created_at, true(), cutoff, limit, walk=walk)
    return _removed(session, MemoryUsage, rows)


def purge_batches(
    session: Session,
    settings: MemorySettings,
    now: datetime,
    limit: int,
    walk: OldRange | None = None,
) -> int:
    if not settings.batch_retention_days:
        return 0
    cutoff = now - timedelta(days=settings.batch_retention_days)
    shown = exists().where(
        Turn.batch_id == ExtractionBatch.id, Turn.status == written_in(TurnStatus.FAILED)
    )
    removable = and_(ExtractionBatch.status != BatchStatus.RUNNING, ~shown)
    born = ExtractionBatch.started_at
    rows = _oldest(session, ExtractionBatch, born, removable, cutoff, limit, walk=walk)
    return batch_totals.remove(session, [row.id for row in rows])


def purge_deleted(session: Session, settings: MemorySettings, now: datetime, limit: int) -> int:
    """Remove memories deleted (`forget`) more than `deleted_retention_days` ago, with
    their events and usage: until then a deletion can be undone, after it the text is
    gone."""
    days = settings.deleted_retention_days
    return _purge_memories(session, MemoryStatus.DELETED, Memory.updated_at, days, now, limit)


def purge_archived(session: Session, settings: MemorySettings, now: datetime, limit: int) -> int:
    """Remove memories archived (decayed unused) more than `archived_retention_days`
    ago, with their events and usage: until then `restore` brings one back."""
    days = settings.archived_retention_days
    return _purge_memories(session, MemoryStatus.ARCHIVED, Memory.archived_at, days, now, limit)


def _purge_memories(
    session: Session,
    status: MemoryStatus,
    since: InstrumentedAttribute[Any],
    days: float,
    now: datetime,
    limit: int,
) -> int:
    """Up to `limit` memories of `status` whose `since` is more than `days` before `now`,
    oldest first, removed with what cascades from them (0 days: none). Read through the
    partial index of that status on `since`: the cost follows the rows purged, not the
    store."""
    if not days:
        return 0
    cutoff = now - timedelta(days=days)
    due = (
        select(Memory.id)
        .where(Memory.status == written_in(status), since < cutoff)
        .order_by(since)
        .limit(limit)
    )
    ids = list(session.scalars(due))
    if not ids:
        return 0
    # Checked again as it goes: a memory restored meanwhile stays.
    still = (Memory.id.in_(ids), Memory.status == status, since < cutoff)
    return rowcount(session.execute(delete(Memory).where(*still)))


Step = Callable[[Session, MemorySettings, datetime, int], int]


def retention_steps() -> dict[str, Step]:
    """The retention steps of one run, by the cycle's count each adds to: the walks of
    old ranges start afresh each run."""
    return {
        "purged": purge_deleted,
        "archived_purged": purge_archived,
        "turns_purged": partial(purge_turns, walk=OldRange()),
        "usage_purged": partial(purge_usage, walk=OldRange()),
        "batches_purged": partial(purge_batches, walk=OldRange()),
    }
