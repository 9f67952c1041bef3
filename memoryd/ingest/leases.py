"""Batch claims under a per-session lease, and the sweeper that makes lost work resume.

A session holds at most one lease at a time (a compare-and-set on its row), so its
batches are applied in order, and a result whose lease was lost is discarded. The
sweeper returns expired leases to pending and finds every session with due turns.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, case, func, or_, select, update
from sqlalchemy.orm import Session

from memoryd.ingest.buffer import pending_count
from memoryd.models.db import is_sqlite, rowcount
from memoryd.models.keys import SessionKey, session_pk, turns_of
from memoryd.models.tables import BatchStatus, ChatSession, ExtractionBatch, Turn, TurnStatus
from memoryd.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimedTurn:
    id: int
    role: str
    content: str
    created_at: datetime


@dataclass(frozen=True)
class Claim:
    key: SessionKey
    batch_id: int
    turns: list[ClaimedTurn]


# ---------------------------------------------------------------------------------- claim


def claim_batch(
    session: Session, settings: Settings, key: SessionKey, now: datetime, kind: str = "extract"
) -> Claim | None:
    """Take the session's lease and its oldest pending turns, or return None.

    A full batch is claimed whenever one is waiting; a partial one only when the session
    has ended or been idle for `flush_idle_seconds`. Returns None (caller rolls back)
    when another worker holds the lease or nothing is due.
    """
    chat = session.scalars(select(ChatSession).where(*session_pk(key))).first()
    if chat is None or (chat.lease_until is not None and chat.lease_until > now):
        return None
    rows = session.execute(
        select(Turn.id, Turn.role, Turn.content, Turn.created_at)
        .where(*turns_of(key), Turn.status == TurnStatus.PENDING)
        .order_by(Turn.id)
        .limit(settings.batch_size)
    ).all()
    idle = chat.last_activity_at <= now - timedelta(seconds=settings.flush_idle_seconds)
    if not rows or (len(rows) < settings.batch_size and chat.ended_at is None and not idle):
        return None

    batch = ExtractionBatch(
        agent_id=key.agent_id,
        user_id=key.user_id,
        session_id=key.session_id,
        kind=kind,
        status=BatchStatus.RUNNING,
        first_turn_id=rows[0].id,
        last_turn_id=rows[-1].id,
        turn_count=len(rows),
        started_at=now,
    )
    session.add(batch)
    session.flush()
    lease_until = now + timedelta(seconds=settings.lease_seconds)
    # Compare-and-set: only one claimer wins even if both read a free lease above.
    taken = session.execute(
        update(ChatSession)
        .where(
            *session_pk(key),
            or_(ChatSession.lease_until.is_(None), ChatSession.lease_until <= now),
        )
        .values(lease_batch_id=batch.id, lease_until=lease_until)
    )
    if rowcount(taken) != 1:
        return None
    ids = [r.id for r in rows]
    session.execute(
        update(Turn)
        .where(Turn.id.in_(ids), Turn.status == TurnStatus.PENDING)
        .values(status=TurnStatus.CLAIMED, batch_id=batch.id, lease_until=lease_until)
    )
    turns = [ClaimedTurn(r.id, r.role, r.content, r.created_at) for r in rows]
    return Claim(key, batch.id, turns)


def release_lease(session: Session, claim: Claim) -> bool:
    """Give the lease back; False means it was lost (expired and reaped) meanwhile."""
    res = session.execute(
        update(ChatSession)
        .where(*session_pk(claim.key), ChatSession.lease_batch_id == claim.batch_id)
        .values(lease_batch_id=None, lease_until=None)
    )
    return rowcount(res) == 1


def finish_turns(session: Session, claim: Claim) -> None:
    """The batch was applied: its turns are done."""
    res = session.execute(
        update(Turn)
        .where(Turn.batch_id == claim.batch_id, Turn.status == TurnStatus.CLAIMED)
        .values(status=TurnStatus.DONE, lease_until=None)
    )
    _uncount_pending(session, claim.key, rowcount(res))


def return_turns(session: Session, settings: Settings, key: SessionKey, batch_id: int) -> int:
    """A batch failed or its lease ran out: its turns go back to pending with one more
    attempt, or to `failed` (kept, re-drivable) once they reach `max_attempts`.
    Returns how many turns were dead-lettered."""
    session.execute(
        update(Turn)
        .where(Turn.batch_id == batch_id, Turn.status == TurnStatus.CLAIMED)
        .values(
            attempts=Turn.attempts + 1,
            lease_until=None,
            status=case(
                (Turn.attempts + 1 >= settings.max_attempts, TurnStatus.FAILED),
                else_=TurnStatus.PENDING,
            ),
        )
    )
    dead = select(func.count()).where(Turn.batch_id == batch_id, Turn.status == TurnStatus.FAILED)
    failed = int(session.scalar(dead) or 0)
    _uncount_pending(session, key, failed)
    return failed


def _uncount_pending(session: Session, key: SessionKey, n: int) -> None:
    if n:
        floor = func.max if is_sqlite(session) else func.greatest
        session.execute(
            update(ChatSession)
            .where(*session_pk(key))
            .values(pending_count=floor(ChatSession.pending_count - n, 0))
        )


# -------------------------------------------------------------------------------- sweeper


def reap_expired_leases(
    session: Session, settings: Settings, now: datetime, limit: int = 500
) -> int:
    """Turns of a batch whose worker died go back to pending (attempts + 1)."""
    expired = session.execute(
        select(
            ChatSession.agent_id,
            ChatSession.user_id,
            ChatSession.session_id,
            ChatSession.lease_batch_id,
        )
        .where(ChatSession.lease_until.is_not(None), ChatSession.lease_until <= now)
        .limit(limit)
    ).all()
    for row in expired:
        key = SessionKey(row.agent_id, row.user_id, row.session_id)
        lost = session.execute(
            update(ChatSession)
            .where(
                *session_pk(key),
                ChatSession.lease_batch_id == row.lease_batch_id,
                ChatSession.lease_until <= now,
            )
            .values(lease_batch_id=None, lease_until=None)
        )
        if rowcount(lost) != 1 or row.lease_batch_id is None:
            continue  # released or renewed between our read and now
        return_turns(session, settings, key, row.lease_batch_id)
        session.execute(
            update(ExtractionBatch)
            .where(
                ExtractionBatch.id == row.lease_batch_id,
                ExtractionBatch.status == BatchStatus.RUNNING,
            )
            .values(
                status=BatchStatus.ABANDONED,
                finished_at=now,
                error="lease expired: the worker died or took longer than lease_seconds",
            )
        )
    if expired:
        log.info("reaped %d expired leases", len(expired))
    return len(expired)


def sessions_due(
    session: Session, settings: Settings, now: datetime, limit: int = 1000
) -> list[SessionKey]:
    """Sessions with pending turns that a worker should look at now: a full batch waits,
    or the session ended or went idle. Counts come from the turns table itself."""
    idle_before = now - timedelta(seconds=settings.flush_idle_seconds)
    pending = (
        select(Turn.agent_id, Turn.user_id, Turn.session_id, func.count().label("n"))
        .where(Turn.status == TurnStatus.PENDING)
        .group_by(Turn.agent_id, Turn.user_id, Turn.session_id)
        .subquery()
    )
    rows = session.execute(
        select(pending.c.agent_id, pending.c.user_id, pending.c.session_id)
        .join(
            ChatSession,
            and_(
                ChatSession.agent_id == pending.c.agent_id,
                ChatSession.user_id == pending.c.user_id,
                ChatSession.session_id == pending.c.session_id,
            ),
        )
        .where(
            or_(ChatSession.lease_until.is_(None), ChatSession.lease_until <= now),
            or_(
                pending.c.n >= settings.batch_size,
                ChatSession.ended_at.is_not(None),
                ChatSession.last_activity_at <= idle_before,
            ),
        )
        .limit(limit)
    ).all()
    return [SessionKey(*r) for r in rows]


def retry_failed(session: Session, now: datetime, key: SessionKey | None = None) -> int:
    """Dead-lettered turns go back to pending with a fresh attempt count; their sessions
    are marked ended so the next sweep flushes them even if they are below batch_size."""
    where = [Turn.status == TurnStatus.FAILED, *(turns_of(key) if key else ())]
    sessions = [
        SessionKey(*r)
        for r in session.execute(
            select(Turn.agent_id, Turn.user_id, Turn.session_id).where(*where).distinct()
        ).all()
    ]
    res = session.execute(
        update(Turn).where(*where).values(status=TurnStatus.PENDING, attempts=0, batch_id=None)
    )
    # Sessions whose compression was dead-lettered get a fresh set of attempts too.
    session.execute(
        update(ChatSession)
        .where(ChatSession.compress_attempts >= 1, *(session_pk(key) if key else ()))
        .values(compress_attempts=0, compress_error=None)
    )
    for k in sessions:
        session.execute(
            update(ChatSession)
            .where(*session_pk(k))
            .values(
                pending_count=pending_count(session, k),
                ended_at=func.coalesce(ChatSession.ended_at, now),
            )
        )
    return rowcount(res)
