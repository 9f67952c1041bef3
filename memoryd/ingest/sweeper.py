"""The sweeper: beat's safety net that makes lost work resume.

A lost broker message, a killed worker or a restarted broker only delays work: every
sweep returns stranded turns (claimed, with no live lease) to pending, one session per
short transaction, and lists every session with due turns for a fresh trigger.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, func, or_, select, tuple_, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from memoryd.ingest.leases import lock_session, recover_stranded
from memoryd.ingest.session_lease import EXTRACTION_LEASE
from memoryd.llm import circuit
from memoryd.models.base import written_in
from memoryd.models.coordination import database_time
from memoryd.models.db import rowcount, session_scope
from memoryd.models.dialect import locks_rows
from memoryd.models.keys import SessionKey, in_sessions, session_pk, turn_session, turns_of
from memoryd.models.tables import ChatSession, Turn, TurnStatus
from memoryd.settings import ExtractionSettings, Settings

log = logging.getLogger(__name__)

TURN_SESSION = (Turn.agent_id, Turn.user_id, Turn.session_id)
ID_CHUNK = 5000  # turn ids per statement, well under a driver's parameter limit


@dataclass
class SweepResult:
    returned_turns: int = 0
    due: list[SessionKey] = field(default_factory=list)
    circuit_open: bool = False


def run_sweep(settings: Settings, now: datetime | None = None, limit: int = 1000) -> SweepResult:
    """Return stranded turns, then find the sessions to trigger. While the LLM circuit is
    open nothing is triggered; when it is half-open, one session (the probe). `now`
    defaults to the database's clock, the one leases are written with."""
    result = SweepResult()
    with session_scope(settings.storage) as session:
        keys = stranded_sessions(session, now or database_time(session), limit)
    for key in keys:  # one short transaction each: a sweep never holds many row locks
        try:
            with session_scope(settings.storage) as session:
                chat = lock_session(session, key)
                if chat is not None:
                    result.returned_turns += recover_stranded(
                        session, settings.extraction, chat, now or database_time(session)
                    )
        except OperationalError as exc:  # e.g. its row locked past lock_timeout
            log.warning("sweep skipped %s this time: %s", key, str(exc).splitlines()[0])
    with session_scope(settings.storage) as session:
        now = now or database_time(session)
        state = circuit.read(session) if settings.llm.llm_configured else None
        if state is not None and state.is_open(now, settings.extraction):
            result.circuit_open = True
            return result
        result.due = sessions_due(session, settings.extraction, now, limit)
        if state is not None and state.is_half_open(now, settings.extraction):
            result.due = result.due[:1]
    if result.returned_turns:
        log.warning("sweep returned %d stranded turns", result.returned_turns)
    return result


def stranded_sessions(session: Session, now: datetime, limit: int = 1000) -> list[SessionKey]:
    """Sessions with a claimed turn that no live lease covers. Reads only the claimed
    turns (a partial index), so it costs what is in flight, not the table's size."""
    rows = session.execute(
        select(Turn.agent_id, Turn.user_id, Turn.session_id)
        .join(ChatSession, turn_session())
        .where(
            Turn.status == written_in(TurnStatus.CLAIMED),
            or_(EXTRACTION_LEASE.free(now), ChatSession.lease_batch_id != Turn.batch_id),
        )
        .distinct()
        .limit(limit)
    ).all()
    return [SessionKey(*r) for r in rows]


def sessions_due(
    session: Session, settings: ExtractionSettings, now: datetime, limit: int = 1000
) -> list[SessionKey]:
    """Sessions with pending turns that a worker should look at now: a full batch waits,
    or the session ended or went idle, and it is not backing off. Counts come from the
    turns table itself."""
    idle_before = now - timedelta(seconds=settings.flush_idle_seconds)
    pending = (
        select(Turn.agent_id, Turn.user_id, Turn.session_id, func.count().label("n"))
        .where(Turn.status == written_in(TurnStatus.PENDING))
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
            EXTRACTION_LEASE.free(now),
            or_(ChatSession.retry_at.is_(None), ChatSession.retry_at <= now),
            or_(
                pending.c.n >= settings.batch_size,
                ChatSession.ended_at.is_not(None),
                ChatSession.last_activity_at <= idle_before,
                ChatSession.split_until.is_not(None),  # isolating a failing turn: go on
            ),
        )
        .limit(limit)
    ).all()
    return [SessionKey(*r) for r in rows]


def retry_failed(
    session: Session,
    now: datetime,
    *,
    agent_id: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
) -> int:
    """Dead-lettered turns (of an agent, a user or a session, or all) go back to pending
    with fresh counts; their sessions are marked ended so the next sweep flushes them even
    below batch_size, and stop backing off."""
    where = dead_letter_turns(agent_id, user_id, session_id)
    chat_where = in_sessions(ChatSession, agent_id, user_id, session_id)
    _lock_sessions(session, where, chat_where)
    # Read after the locks, so the session of every turn returned is recounted below.
    dead = session.execute(select(Turn.id, *TURN_SESSION).where(*where)).all()
    keys = sorted({SessionKey(*r[1:]) for r in dead}, key=lambda k: k.as_args())
    returned = 0
    for start in range(0, len(dead), ID_CHUNK):
        ids = [r.id for r in dead[start : start + ID_CHUNK]]
        res = session.execute(
            update(Turn)
            .where(Turn.id.in_(ids), *where)
            .values(status=TurnStatus.PENDING, attempts=0, lost_leases=0)
        )
        returned += rowcount(res)
    # Sessions whose compression was dead-lettered get a fresh set of attempts too.
    session.execute(
        update(ChatSession)
        .where(ChatSession.compress_attempts >= 1, *chat_where)
        .values(compress_attempts=0, compress_error=None)
    )
    _recount(session, keys, now)
    return returned


def _recount(session: Session, keys: list[SessionKey], now: datetime) -> None:
    """Sessions given turns back: recounted, marked ended (flushed at the next sweep even
    below batch_size), and no longer backing off."""
    for key in keys:
        pending = select(func.count()).where(
            *turns_of(key), Turn.status == written_in(TurnStatus.PENDING)
        )
        session.execute(
            update(ChatSession)
            .where(*session_pk(key))
            .values(
                pending_count=pending.scalar_subquery(),
                ended_at=func.coalesce(ChatSession.ended_at, now),
                transient_failures=0,
                retry_at=None,
            )
        )


def _lock_sessions(
    session: Session, where: list[ColumnElement[bool]], chat_where: list[ColumnElement[bool]]
) -> None:
    """The session rows retry_failed changes, locked first and in key order: the order
    claims (a session, then its turns) and ingest (sessions by key) take them in."""
    if not locks_rows(session):
        return  # the write transaction already holds the database lock
    pk = (ChatSession.agent_id, ChatSession.user_id, ChatSession.session_id)
    with_dead_letters = tuple_(*pk).in_(select(*TURN_SESSION).where(*where))
    chosen = or_(with_dead_letters, and_(ChatSession.compress_attempts >= 1, *chat_where))
    in_key_order = (column.collate("C") for column in pk)  # as ingest locks them (rows.py)
    session.execute(select(*pk).where(chosen).order_by(*in_key_order).with_for_update()).all()


def skip_failed(
    session: Session,
    *,
    agent_id: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
) -> int:
    """Dead-lettered turns are given up on: kept as the conversation's history (session
    context, compression), never extracted. Returns how many."""
    skipped = update(Turn).where(*dead_letter_turns(agent_id, user_id, session_id))
    return rowcount(session.execute(skipped.values(status=TurnStatus.SKIPPED)))


def purge_failed(
    session: Session,
    *,
    agent_id: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
) -> int:
    """Dead-lettered turns are deleted, text and all. Returns how many."""
    purged = delete(Turn).where(*dead_letter_turns(agent_id, user_id, session_id))
    return rowcount(session.execute(purged))


def dead_letter_turns(
    agent_id: str | None, user_id: str | None, session_id: str | None
) -> list[ColumnElement[bool]]:
    """Which turns are the dead letters of an agent, a user or a session (or all): what
    is settled here and what monitoring lists."""
    return [
        Turn.status == written_in(TurnStatus.FAILED),
        *in_sessions(Turn, agent_id, user_id, session_id),
    ]
