"""Erasure: every row a scope, or one of its sessions, left in the store, removed.

Order matters while workers run. The sessions go first: a batch or a compression run in
flight writes only under its session's lease (an UPDATE of that row), so once the row is
gone its write finds no lease and is refused; it cannot bring back what was erased. Then
the memories (their postings, events, usage and conflict reviews go with them, ON DELETE
CASCADE), the scope's usage of its agent's shared memories, turns, summaries, batches
and profiles (with their history). Each chunk is a short transaction of its own, so
other scopes' work never waits long; passes repeat until one finds nothing, so a turn
that arrived mid-way is erased too.

An erasure is recorded before it starts (`erasures`). While it runs that row holds the
ids, so one that was interrupted is finished by the next `erase` of the same scope or by
the maintenance cycle (`resume_interrupted`); once done it keeps a digest of the ids,
the actor, the times and the row counts: nothing that names the scope.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import ColumnElement, Select, delete, select
from sqlalchemy.orm import Session

from memoryd.errors import error_text
from memoryd.models import batch_totals
from memoryd.models.coordination import lock_scope
from memoryd.models.db import checkpoint_sqlite, rowcount, session_scope, utcnow
from memoryd.models.dialect import for_update, one_writer_at_a_time
from memoryd.models.keys import Scope
from memoryd.models.schemas import Ident
from memoryd.models.tables import (
    ChatSession,
    Erasure,
    ExtractionBatch,
    KeyAlias,
    Memory,
    MemoryUsage,
    Profile,
    SessionSegment,
    SubjectKey,
    Turn,
)
from memoryd.settings import Settings, StorageSettings

log = logging.getLogger(__name__)

CHUNK = 500  # rows per transaction
# SQLite: the pause after a chunk, as a share of the time it held the write lock, and
# its floor in seconds (_yield says why).
YIELD = 0.5
MIN_PAUSE = 0.025
MAX_PASSES = 5  # a scope still receiving writes after this many passes is left to them
# An erasure whose row has not moved for this long was interrupted: the maintenance
# cycle finishes it.
STALLED = timedelta(minutes=5)


class ErasureOut(BaseModel):
    """What an erasure did. `digest` is SHA-256 of agent, user and session joined by NUL:
    whoever holds the ids can recompute it to show that the scope was erased.
    `finished_at` is None while writes kept arriving after MAX_PASSES passes: the
    maintenance cycle finishes it."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    digest: str
    actor: str
    whole_scope: bool
    rows: dict[str, int]
    requested_at: datetime
    finished_at: datetime | None


class EraseRequest(BaseModel):
    """What to erase, as a person names it (CLI, page): ids checked like a turn's."""

    agent_id: Ident
    user_id: Ident
    session_id: Ident | None = None


@dataclass(frozen=True)
class Target:
    agent_id: str
    user_id: str
    session_id: str | None  # None: the whole scope

    @property
    def digest(self) -> str:
        parts = [self.agent_id, self.user_id, *([self.session_id] if self.session_id else [])]
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def erase(
    settings: Settings, scope: Scope, *, actor: str, session_id: str | None = None
) -> ErasureOut:
    """Remove every row of `scope` (or of its session `session_id`) from every table.
    Idempotent: erasing an erased scope records another erasure that removed nothing."""
    target = Target(scope.agent_id, scope.user_id, session_id)
    with session_scope(settings.storage) as session:
        erasure_id = _start(session, target, actor, utcnow())
    return _run(settings, erasure_id, target)


def resume_interrupted(settings: Settings, now: datetime) -> int:
    """Finish erasures that stopped mid-way (a killed process): how many."""
    stalled = select(Erasure.id, Erasure.agent_id, Erasure.user_id, Erasure.session_id).where(
        Erasure.finished_at.is_(None), Erasure.updated_at < now - STALLED
    )
    with session_scope(settings.storage, readonly=True) as session:
        rows = session.execute(stalled.limit(100)).all()
    finished = 0
    for row in rows:
        try:
            _run(settings, row.id, Target(row.agent_id, row.user_id, row.session_id))
            finished += 1
        except Exception as exc:  # one erasure's trouble must not stop the cycle
            log.warning("erasure %s not finished: %s", row.id, error_text(exc))
    return finished


def _start(session: Session, target: Target, actor: str, now: datetime) -> int:
    running = session.scalar(
        select(Erasure.id).where(Erasure.digest == target.digest, Erasure.finished_at.is_(None))
    )
    if running is not None:
        return running
    erasure = Erasure(
        digest=target.digest,
        actor=actor,
        agent_id=target.agent_id,
        user_id=target.user_id,
        session_id=target.session_id,
        whole_scope=target.session_id is None,
        rows={},
        requested_at=now,
        updated_at=now,
    )
    session.add(erasure)
    session.flush()
    return erasure.id


def _run(settings: Settings, erasure_id: int, target: Target) -> ErasureOut:
    steps = SCOPE_STEPS if target.session_id is None else SESSION_STEPS
    settled = False
    for _ in range(MAX_PASSES):
        removed = sum(
            _drain(settings.storage, erasure_id, target, name, pick) for name, pick in steps
        )
        if not removed:
            settled = True
            break
    with session_scope(settings.storage) as session:
        erasure = session.get_one(Erasure, erasure_id)  # its rows counted chunk by chunk
        erasure.updated_at = utcnow()
        if settled:
            erasure.agent_id = erasure.user_id = erasure.session_id = None
            erasure.finished_at = erasure.updated_at
        erased = ErasureOut.model_validate(erasure)
    checkpoint_sqlite(settings.storage)  # the erased text leaves the WAL too
    return erased


Pick = Callable[[Session, Target], list[Any]]


def _drain(
    settings: StorageSettings, erasure_id: int, target: Target, name: str, pick: Pick
) -> int:
    """Delete what `pick` finds, CHUNK rows per transaction, until nothing is left: the
    rows removed."""
    removed = 0
    while True:
        with session_scope(settings) as session:
            session.connection()  # BEGIN: on SQLite, the wait for the write lock
            started = time.perf_counter()
            count = _chunk(session, erasure_id, target, name, pick)
            yields = one_writer_at_a_time(session)
        if count is None:
            return removed
        removed += count
        if yields:
            _yield(time.perf_counter() - started)


def _chunk(session: Session, erasure_id: int, target: Target, name: str, pick: Pick) -> int | None:
    """Delete the next chunk `pick` finds and count it on the erasure's row: how many
    rows went, None when none was left."""
    table, key = TABLES[name]
    keys = pick(session, target)
    if not keys:
        return None
    if table is ExtractionBatch:  # the pipeline's totals keep their figures
        count = batch_totals.remove(session, keys)
    else:
        gone = delete(table).where(key.in_(keys))
        if table in (ChatSession, KeyAlias):  # their keys are unique within a scope only
            gone = gone.where(*_in_scope(table, target))
        count = rowcount(session.execute(gone))
    erasure = session.get_one(Erasure, erasure_id)
    erasure.rows = {**erasure.rows, name: erasure.rows.get(name, 0) + count}
    erasure.updated_at = utcnow()
    return count


def _yield(held: float) -> None:
    """Pause after a chunk that held SQLite's write lock for `held` seconds.

    SQLite has one writer, and a writer waiting for the lock does not queue: its busy
    handler sleeps and tries again, sleeping longer the longer it has waited (1, 2, 5,
    10, 15, 20 ms, then 25 ms up to 0.128 s of waiting, 50 ms up to 0.228 s, then 100
    ms). Chunks committed back to back free the lock for a fraction of a millisecond,
    which such a try almost never hits: another scope's extraction waited out the
    whole erasure. A waiter that arrived during the chunk has waited at most `held`, so
    its next try comes within the sleep that schedule gives at `held`; a pause at least
    that long lets it in. Half of `held`, and never less than min(held + 2 ms, 25 ms),
    is at least that sleep at every point of the schedule. Each writer then waits about
    one chunk, and the erasure takes about half as long again. PostgreSQL needs no
    pause: an erasure locks its own scope and rows only."""
    time.sleep(max(held * YIELD, min(held + 0.002, MIN_PAUSE)))


def _in_scope(table: Any, target: Target) -> list[ColumnElement[bool]]:
    where = [table.of(target)]
    if target.session_id is not None and hasattr(table, "session_id"):
        where.append(table.session_id == target.session_id)
    return where


def _first(session: Session, query: Select[Any], *order: Any) -> list[Any]:
    return list(session.scalars(query.order_by(*order).limit(CHUNK)))


def _picker(table: Any, key: Any, *order: Any) -> Pick:
    """The next chunk of `table`'s rows in the target, in `order` (an index's)."""

    def pick(session: Session, target: Target) -> list[Any]:
        return _first(session, select(key).where(*_in_scope(table, target)), *order)

    return pick


def _memories(session: Session, target: Target) -> list[Any]:
    """The next chunk of the scope's memories, locked in id order as recall locks its
    hits, so the two queue instead of deadlocking; the scope locked first, as every
    writer of its memories locks it."""
    lock_scope(session, Scope(target.agent_id, target.user_id))
    query = for_update(session, select(Memory.id).where(*_in_scope(Memory, target)))
    return _first(session, query, Memory.id)


def _session_memories(session: Session, target: Target) -> list[Any]:
    """Memories learnt from the session: one of their source turns was said in it.
    Found before its turns go (SESSION_STEPS' order), the scope locked first."""
    lock_scope(session, Scope(target.agent_id, target.user_id))
    turn_ids = set(session.scalars(select(Turn.id).where(*_in_scope(Turn, target))))
    if not turn_ids:
        return []
    scope_memories = select(Memory.id, Memory.source_turn_ids).where(Memory.of(target))
    learnt = [
        row.id
        for row in session.execute(scope_memories.order_by(Memory.id))
        if turn_ids.intersection(row.source_turn_ids or ())
    ]
    return learnt[:CHUNK]


TABLES: dict[str, tuple[Any, Any]] = {
    "sessions": (ChatSession, ChatSession.session_id),
    "memories": (Memory, Memory.id),
    "memory_usage": (MemoryUsage, MemoryUsage.id),
    "turns": (Turn, Turn.id),
    "session_segments": (SessionSegment, SessionSegment.id),
    "extraction_batches": (ExtractionBatch, ExtractionBatch.id),
    "profiles": (Profile, Profile.id),
    "subject_keys": (SubjectKey, SubjectKey.id),
    "key_aliases": (KeyAlias, KeyAlias.alias),
}
_sessions = _picker(ChatSession, ChatSession.session_id, ChatSession.session_id)
_turns = _picker(Turn, Turn.id, Turn.session_id, Turn.id)  # ix_turns_session's order
_segments = _picker(SessionSegment, SessionSegment.id, SessionSegment.session_id)
_batches = _picker(ExtractionBatch, ExtractionBatch.id, ExtractionBatch.session_id)
_profiles = _picker(Profile, Profile.id, Profile.id)
# The key index's rows name the scope's subjects; after its memories went, they are
# what the triggers left (models/key_index.py).
_keys = _picker(SubjectKey, SubjectKey.id, SubjectKey.id)
_aliases = _picker(KeyAlias, KeyAlias.alias, KeyAlias.alias)
# The scope's recalls of its agent's shared memories (its own memories' usage goes with
# them): a usage row names the user who asked (ix_memory_usage_scope's order).
_usage = _picker(MemoryUsage, MemoryUsage.id, MemoryUsage.id)
SCOPE_STEPS: Sequence[tuple[str, Pick]] = [
    ("sessions", _sessions),
    ("memories", _memories),
    ("memory_usage", _usage),
    ("turns", _turns),
    ("session_segments", _segments),
    ("extraction_batches", _batches),
    ("profiles", _profiles),
    ("subject_keys", _keys),
    ("key_aliases", _aliases),
]
# One session: what was said in it and learnt from it; the profiles stay.
SESSION_STEPS: Sequence[tuple[str, Pick]] = [
    ("sessions", _sessions),
    ("memories", _session_memories),
    ("memory_usage", _usage),
    ("turns", _turns),
    ("session_segments", _segments),
    ("extraction_batches", _batches),
]
