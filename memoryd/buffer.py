"""The turn buffer: ingest, batch claims under a per-session lease, and the sweeper.

The database is the source of truth; broker messages only say "look at this session".
A session holds at most one lease at a time (a compare-and-set on its row), so its
batches are applied in order, and a result whose lease was lost is discarded.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, and_, case, func, or_, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import Session

from memoryd.db import is_sqlite, rowcount
from memoryd.errors import TurnRejected
from memoryd.models.tables import (
    Base,
    BatchStatus,
    ChatSession,
    ExtractionBatch,
    Turn,
    TurnStatus,
)
from memoryd.schemas import IngestResult, TurnIn
from memoryd.settings import Settings
from memoryd.text import estimate_tokens

log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class SessionKey:
    agent_id: str
    user_id: str
    session_id: str

    def as_args(self) -> list[str]:
        return [self.agent_id, self.user_id, self.session_id]


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


# ------------------------------------------------------------------------------ validation


def validate_turns(
    items: Sequence[Mapping[str, Any] | TurnIn], settings: Settings
) -> tuple[list[TurnIn], list[dict[str, Any]]]:
    """Validate each item on its own: good items go on, bad ones are reported by index."""
    if len(items) > settings.max_bulk_turns:
        raise TurnRejected(
            f"{len(items)} turns in one call; the limit is {settings.max_bulk_turns} "
            "(MEMORYD_MAX_BULK_TURNS): split the call"
        )
    good: list[TurnIn] = []
    bad: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        try:
            turn = item if isinstance(item, TurnIn) else TurnIn.model_validate(item)
        except ValidationError as exc:
            bad.append({"index": index, "errors": _field_errors(exc)})
            continue
        except (TypeError, ValueError) as exc:
            bad.append({"index": index, "errors": [{"field": "", "message": str(exc)}]})
            continue
        if len(turn.content) > settings.max_turn_chars:
            bad.append(
                {
                    "index": index,
                    "errors": [
                        {
                            "field": "content",
                            "message": f"content has {len(turn.content)} characters; the limit is "
                            f"{settings.max_turn_chars} (MEMORYD_MAX_TURN_CHARS)",
                        }
                    ],
                }
            )
            continue
        good.append(turn)
    return good, bad


def _field_errors(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {"field": ".".join(str(p) for p in err["loc"]) or "(payload)", "message": err["msg"]}
        for err in exc.errors(include_url=False, include_input=False)
    ]


# --------------------------------------------------------------------------------- ingest


# PostgreSQL: turns and their session's counters in ONE statement, so an enqueue on an
# autocommit connection is a single round trip. Arrays carry any number of turns.
# sessions.pending_count only decides when to send a trigger; the sweeper reads the
# turns themselves, so the counter can never strand a turn. Both statements run on the
# psycopg cursor itself (plain %(name)s placeholders): SQLAlchemy's compile and result
# layers cost more than the round trip, and psycopg prepares repeated statements.
_PG_STORE_TURNS = """
WITH new_turns AS (
    INSERT INTO turns (turn_key, agent_id, user_id, session_id, role, content, metadata,
                       created_at, status, attempts, token_count)
    SELECT k, a, u, s, r, c, m::json, t, 'pending', 0, n
    FROM unnest(CAST(%(keys)s AS text[]), CAST(%(agents)s AS text[]),
                CAST(%(users)s AS text[]), CAST(%(sessions)s AS text[]),
                CAST(%(roles)s AS text[]), CAST(%(contents)s AS text[]),
                CAST(%(metas)s AS text[]), CAST(%(times)s AS timestamptz[]),
                CAST(%(tokens)s AS int[]))
         AS x(k, a, u, s, r, c, m, t, n)
    ON CONFLICT (agent_id, user_id, turn_key) DO NOTHING
    RETURNING id, agent_id, user_id, session_id
), per_session AS (
    SELECT agent_id, user_id, session_id, count(*) AS added
    FROM new_turns GROUP BY agent_id, user_id, session_id
), bumped AS (
    INSERT INTO sessions AS s (agent_id, user_id, session_id, last_activity_at, pending_count)
    SELECT agent_id, user_id, session_id, %(now)s, added FROM per_session
    ORDER BY agent_id, user_id, session_id
    ON CONFLICT (agent_id, user_id, session_id) DO UPDATE SET
        pending_count = s.pending_count + excluded.pending_count,
        last_activity_at = excluded.last_activity_at,
        ended_at = NULL
    RETURNING agent_id, user_id, session_id, pending_count
)
SELECT id, NULL, NULL, NULL, NULL, NULL FROM new_turns
UNION ALL
SELECT NULL, b.agent_id, b.user_id, b.session_id, b.pending_count - p.added, p.added
FROM bumped b JOIN per_session p USING (agent_id, user_id, session_id)
"""

# The same for one turn with scalar parameters: no array encoding and no unnest, the
# common case of a chat backend storing each message as it arrives. No row back means
# the turn_key was a duplicate.
_PG_STORE_ONE_TURN = """
WITH new_turn AS (
    INSERT INTO turns (turn_key, agent_id, user_id, session_id, role, content, metadata,
                       created_at, status, attempts, token_count)
    VALUES (%(key)s, %(agent)s, %(user)s, %(session)s, %(role)s, %(content)s,
            CAST(%(meta)s AS json), %(time)s, 'pending', 0, %(tokens)s)
    ON CONFLICT (agent_id, user_id, turn_key) DO NOTHING
    RETURNING id, agent_id, user_id, session_id
)
INSERT INTO sessions AS s (agent_id, user_id, session_id, last_activity_at, pending_count)
SELECT agent_id, user_id, session_id, %(now)s, 1 FROM new_turn
ON CONFLICT (agent_id, user_id, session_id) DO UPDATE SET
    pending_count = s.pending_count + 1,
    last_activity_at = excluded.last_activity_at,
    ended_at = NULL
RETURNING (SELECT id FROM new_turn), s.pending_count
"""


def _meta_json(meta: dict[str, Any] | None) -> str | None:
    return None if meta is None else json.dumps(meta)


def _store_turns_pg(
    conn: Connection, rows: list[dict[str, Any]], now: datetime
) -> tuple[list[int], list[tuple[SessionKey, int, int]]]:
    """Returns the new turn ids and, per touched session, (key, pending before, added)."""
    psycopg_conn: Any = conn.connection.driver_connection
    with psycopg_conn.cursor() as cursor:
        if len(rows) == 1:
            r = rows[0]
            cursor.execute(
                _PG_STORE_ONE_TURN,
                {
                    "key": r["turn_key"],
                    "agent": r["agent_id"],
                    "user": r["user_id"],
                    "session": r["session_id"],
                    "role": r["role"],
                    "content": r["content"],
                    "meta": _meta_json(r["metadata"]),
                    "time": r["created_at"],
                    "tokens": r["token_count"],
                    "now": now,
                },
            )
            one = cursor.fetchone()
            if one is None:
                return [], []
            key = SessionKey(r["agent_id"], r["user_id"], r["session_id"])
            return [one[0]], [(key, one[1] - 1, 1)]
        cursor.execute(
            _PG_STORE_TURNS,
            {
                "keys": [r["turn_key"] for r in rows],
                "agents": [r["agent_id"] for r in rows],
                "users": [r["user_id"] for r in rows],
                "sessions": [r["session_id"] for r in rows],
                "roles": [r["role"] for r in rows],
                "contents": [r["content"] for r in rows],
                "metas": [_meta_json(r["metadata"]) for r in rows],
                "times": [r["created_at"] for r in rows],
                "tokens": [r["token_count"] for r in rows],
                "now": now,
            },
        )
        ids: list[int] = []
        touched: list[tuple[SessionKey, int, int]] = []
        for turn_id, agent, user, chat, before, added in cursor.fetchall():
            if turn_id is not None:
                ids.append(turn_id)
            else:
                touched.append((SessionKey(agent, user, chat), before, added))
        return ids, touched


def _store_turns_sqlite(
    conn: Connection, rows: list[dict[str, Any]], now: datetime
) -> tuple[list[int], list[tuple[SessionKey, int, int]]]:
    """The same in two statements, inside the caller's (write-locked) transaction."""
    turns, sessions = Base.metadata.tables["turns"], Base.metadata.tables["sessions"]
    inserted = conn.execute(
        sqlite.insert(turns)
        .on_conflict_do_nothing(index_elements=["agent_id", "user_id", "turn_key"])
        .returning(turns.c.id, turns.c.agent_id, turns.c.user_id, turns.c.session_id),
        rows,
    ).all()
    added = Counter(SessionKey(r.agent_id, r.user_id, r.session_id) for r in inserted)
    upsert = sqlite.insert(sessions)
    touched = []
    for key, n in sorted(added.items()):
        pending = conn.execute(
            upsert.values(
                agent_id=key.agent_id,
                user_id=key.user_id,
                session_id=key.session_id,
                last_activity_at=now,
                pending_count=n,
            )
            .on_conflict_do_update(
                index_elements=["agent_id", "user_id", "session_id"],
                set_={
                    "pending_count": sessions.c.pending_count + n,
                    "last_activity_at": now,
                    "ended_at": None,
                },
            )
            .returning(sessions.c.pending_count)
        ).scalar_one()
        touched.append((key, pending - n, n))
    return [r.id for r in inserted], touched


def pending_count(session: Session, key: SessionKey) -> int:
    return int(
        session.scalar(
            select(func.count()).where(*_turns_of(key), Turn.status == TurnStatus.PENDING)
        )
        or 0
    )


def store_turns(
    db: Session | Connection, settings: Settings, turns: Sequence[TurnIn], now: datetime
) -> tuple[IngestResult, list[SessionKey]]:
    """Insert validated turns (a repeated turn_key is a no-op) and bump their sessions.

    `db` is an ORM session or a Core connection (the client's hot path skips the ORM).

    Returns the result and the sessions whose pending turns just crossed a multiple of
    `batch_size`: the caller dispatches those after commit.
    """
    result = IngestResult()
    if not turns:
        return result, []
    rows = [
        {
            "turn_key": t.turn_key,
            "agent_id": t.agent_id,
            "user_id": t.user_id,
            "session_id": t.session_id,
            "role": t.role,
            "content": t.content,
            "metadata": t.metadata,
            "created_at": t.timestamp or now,
            "status": TurnStatus.PENDING,
            "attempts": 0,
            "token_count": estimate_tokens(t.content),
        }
        for t in turns
    ]
    conn = db.connection() if isinstance(db, Session) else db
    store = _store_turns_sqlite if conn.dialect.name == "sqlite" else _store_turns_pg
    ids, touched = store(conn, rows, now)
    result.accepted = len(ids)
    result.duplicates = len(rows) - len(ids)
    result.turn_ids = sorted(ids)
    size = settings.batch_size
    due = [key for key, before, added in touched if (before + added) // size > before // size]
    return result, due


def end_session(session: Session, key: SessionKey, now: datetime) -> bool:
    """Mark a session ended so its remaining turns are extracted now. False if unknown."""
    res = session.execute(update(ChatSession).where(*_session_pk(key)).values(ended_at=now))
    return bool(rowcount(res))


def _session_pk(key: SessionKey) -> tuple[Any, ...]:
    return (
        ChatSession.agent_id == key.agent_id,
        ChatSession.user_id == key.user_id,
        ChatSession.session_id == key.session_id,
    )


def _turns_of(key: SessionKey) -> tuple[Any, ...]:
    return (
        Turn.agent_id == key.agent_id,
        Turn.user_id == key.user_id,
        Turn.session_id == key.session_id,
    )


# ---------------------------------------------------------------------------------- claim


def claim_batch(
    session: Session, settings: Settings, key: SessionKey, now: datetime, kind: str = "extract"
) -> Claim | None:
    """Take the session's lease and its oldest pending turns, or return None.

    A full batch is claimed whenever one is waiting; a partial one only when the session
    has ended or been idle for `flush_idle_seconds`. Returns None (caller rolls back)
    when another worker holds the lease or nothing is due.
    """
    chat = session.scalars(select(ChatSession).where(*_session_pk(key))).first()
    if chat is None or (chat.lease_until is not None and chat.lease_until > now):
        return None
    rows = session.execute(
        select(Turn.id, Turn.role, Turn.content, Turn.created_at)
        .where(*_turns_of(key), Turn.status == TurnStatus.PENDING)
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
            *_session_pk(key),
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
        .where(*_session_pk(claim.key), ChatSession.lease_batch_id == claim.batch_id)
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
            .where(*_session_pk(key))
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
                *_session_pk(key),
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
    where = [Turn.status == TurnStatus.FAILED, *(_turns_of(key) if key else ())]
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
        .where(ChatSession.compress_attempts >= 1, *(_session_pk(key) if key else ()))
        .values(compress_attempts=0, compress_error=None)
    )
    for k in sessions:
        session.execute(
            update(ChatSession)
            .where(*_session_pk(k))
            .values(
                pending_count=pending_count(session, k),
                ended_at=func.coalesce(ChatSession.ended_at, now),
            )
        )
    return rowcount(res)
