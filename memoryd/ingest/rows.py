"""Writing turns and their sessions' counters, one way per database: the ingest hot path.

`store` takes validated turns and returns the new turn ids and, per touched session,
(key, pending before, added), through the database's own way (store_pg, store_sqlite).
Each turn becomes one tuple of its column values (`Values`), built once: a dict per
turn, then the statement's lists made from it, cost a bulk call more than its validation.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, exc
from sqlalchemy.dialects import sqlite
from sqlalchemy.pool import PoolProxiedConnection

from memoryd.models.keys import SessionKey
from memoryd.models.schemas import TurnIn
from memoryd.models.tables import Base, TurnStatus
from memoryd.text import estimate_tokens

log = logging.getLogger(__name__)
T = TypeVar("T")


class Values(NamedTuple):
    """One turn's column values, in the order of the arrays below."""

    turn_key: str | None
    agent_id: str
    user_id: str
    session_id: str
    role: str
    content: str
    metadata: dict[str, Any] | None
    created_at: datetime
    token_count: int


# What storing gives back: the new turns' ids, and per touched session (key, pending
# before, added).
Stored = tuple[list[int], list[tuple[SessionKey, int, int]]]


def turn_values(turn: TurnIn, now: datetime) -> Values:
    return Values(
        turn.turn_key, turn.agent_id, turn.user_id, turn.session_id, turn.role, turn.content,
        turn.metadata, turn.timestamp or now, estimate_tokens(turn.content),
    )  # fmt: skip


# PostgreSQL: turns and their session's counters in ONE statement, so an enqueue on an
# autocommit connection is a single round trip. Arrays carry any number of turns.
# sessions.pending_count only decides when to send a trigger; the sweeper reads the
# turns themselves, so the counter can never strand a turn. The statements run on the
# psycopg cursor itself (%(name)s and %(name)b placeholders): SQLAlchemy's compile and
# result layers cost more than the round trip, and psycopg prepares repeated statements.
INSERT_TURNS = """
INSERT INTO turns (turn_key, agent_id, user_id, session_id, role, content, metadata,
                   created_at, received_at, status, attempts, token_count)
SELECT k, a, u, s, r, c, m::json, t, %(now)s, 'pending', 0, n
FROM {source}
ON CONFLICT (agent_id, user_id, turn_key) DO NOTHING
RETURNING id, agent_id, user_id, session_id
"""
# Sessions are locked in key order, as every writer of several locks them: in code
# points' order (COLLATE "C", Python's order of str), whatever the database's collation,
# as chunks.py puts a large call's turns in.
BUMP_SESSIONS = """
INSERT INTO sessions AS s (agent_id, user_id, session_id, last_activity_at, pending_count)
SELECT a, u, c, %(now)s, n FROM {source}
ORDER BY a COLLATE "C", u COLLATE "C", c COLLATE "C"
ON CONFLICT (agent_id, user_id, session_id) DO UPDATE SET
    pending_count = s.pending_count + excluded.pending_count,
    last_activity_at = excluded.last_activity_at,
    ended_at = NULL
RETURNING agent_id, user_id, session_id, pending_count
"""
# Each bumped session as a row of what storing returns: (NULL, key, pending before, added).
BUMPED_ROWS = """
SELECT NULL, b.agent_id, b.user_id, b.session_id, b.pending_count - p.n, p.n
FROM bumped b JOIN per_session p ON (b.agent_id, b.user_id, b.session_id) = (p.a, p.u, p.c)
"""
_PG_STORE_TURNS = f"""
WITH new_turns AS ({{insert}}), per_session AS (
    SELECT agent_id AS a, user_id AS u, session_id AS c, count(*) AS n
    FROM new_turns GROUP BY agent_id, user_id, session_id
), bumped AS ({{bump}})
SELECT id, NULL, NULL, NULL, NULL, NULL FROM new_turns
UNION ALL {BUMPED_ROWS}"""
# The arrays go in binary (%(name)b): the server then parses no array literal, whose
# quoting of every text cost a call of 1,000 turns in sessions of 50 about a third of
# its rate (bench/ingest.py's history import).
FROM_ARRAYS = """unnest(CAST(%(turn_key)b AS text[]), CAST(%(agent_id)b AS text[]),
                CAST(%(user_id)b AS text[]), CAST(%(session_id)b AS text[]),
                CAST(%(role)b AS text[]), CAST(%(content)b AS text[]),
                CAST(%(metadata)b AS text[]), CAST(%(created_at)b AS timestamptz[]),
                CAST(%(token_count)b AS int[]))
         AS x(k, a, u, s, r, c, m, t, n)"""
PG_STORE_ARRAYS = _PG_STORE_TURNS.format(
    insert=INSERT_TURNS.format(source=FROM_ARRAYS),
    bump=BUMP_SESSIONS.format(source="per_session"),
)

# The same for one turn with scalar parameters: no array encoding and no unnest, the
# common case of a chat backend storing each message as it arrives. No row back means
# the turn_key was a duplicate.
_PG_STORE_ONE_TURN = """
WITH new_turn AS (
    INSERT INTO turns (turn_key, agent_id, user_id, session_id, role, content, metadata,
                       created_at, received_at, status, attempts, token_count)
    VALUES (%(turn_key)s, %(agent_id)s, %(user_id)s, %(session_id)s, %(role)s, %(content)s,
            CAST(%(metadata)s AS json), %(created_at)s, %(now)s, 'pending', 0, %(token_count)s)
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


def store(
    conn: Connection | PoolProxiedConnection, turns: Sequence[TurnIn], now: datetime
) -> Stored:
    """Store the turns and bump their sessions' counters, the way this database does it
    fastest. `conn` is a Core connection, or on PostgreSQL the pool's own connection
    (db.write_connection)."""
    values = [turn_values(turn, now) for turn in turns]
    if not isinstance(conn, Connection):
        return store_pg(conn, values, now, conn.invalidate)
    if conn.dialect.name == "sqlite":
        return store_sqlite(conn, values, now)
    return store_pg(conn.connection, values, now, conn.invalidate)


def meta_json(meta: dict[str, Any] | None) -> str | None:
    return None if meta is None else json.dumps(meta)


def store_pg(
    pooled: PoolProxiedConnection,
    values: list[Values],
    now: datetime,
    invalidate: Callable[[BaseException], None],
) -> Stored:
    """Returns the new turn ids and, per touched session, (key, pending before, added).
    `invalidate` tells SQLAlchemy the connection is dead."""
    from memoryd.ingest import chunks  # which builds on this module

    if len(values) > chunks.CHUNK_TURNS:
        return chunks.store_pg_chunks(pooled, chunks.of_values(values), now, invalidate)
    return pg_errors(lambda: _run_pg_store(pooled.driver_connection, values, now), invalidate)


# What PostgreSQL answers when it ends a statement and keeps its connection: a deadlock
# or a serialization failure (class 40), a statement or lock timeout.
_CONNECTION_KEPT = ("40", "57014", "55P03")


def pg_errors(run: Callable[[], Stored], invalidate: Callable[[BaseException], None]) -> Stored:
    """run(), with psycopg's errors reported as SQLAlchemy's."""
    import psycopg  # loaded with the PostgreSQL engine anyway; SQLite users skip it

    try:
        return run()
    except psycopg.Error as error:
        kept = (error.sqlstate or "").startswith(_CONNECTION_KEPT)
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError) and not kept:
            # The server went away (a restart): SQLAlchemy did not see this error, so tell
            # its pool, or the dead connection would be handed out again on every call.
            invalidate(error)
        # The cursor is psycopg's own: report it as SQLAlchemy would have, in the class
        # callers catch (a refused row, an outage, a missing table before migrating).
        raise exc.DBAPIError.instance("INSERT INTO turns", None, error, psycopg.Error) from error


# A write PostgreSQL ends to break a deadlock rolled back whole, so it is run again:
# a cycle over turn keys alone (the same keys sent in other orders by two calls, or a
# key sent under another session of its user) has no lock order to prevent it.
DEADLOCK_RETRIES = 3


def again_after_deadlock(write: Callable[[bool], T]) -> T:
    """write(again), run again with again=True, at most DEADLOCK_RETRIES times, while
    PostgreSQL ends it to break a deadlock."""
    for attempt in range(DEADLOCK_RETRIES):
        try:
            return write(attempt > 0)
        except exc.OperationalError as error:
            if getattr(error.orig, "sqlstate", None) != "40P01":
                raise
            log.warning("an ingest call met a deadlock (attempt %d); storing it again", attempt + 1)
    return write(True)  # the last attempt, whatever it raises


def _run_pg_store(psycopg_conn: Any, values: list[Values], now: datetime) -> Stored:
    with psycopg_conn.cursor() as cursor:
        if len(values) == 1:
            return _store_one(cursor, values[0], now)
        cursor.execute(PG_STORE_ARRAYS, arrays(values, now))
        return stored_rows(cursor.fetchall())


def stored_rows(rows: Iterable[Any]) -> Stored:
    """The statement's rows as store returns them: the new turns' ids, then per touched
    session (key, pending before, added)."""
    ids: list[int] = []
    touched: list[tuple[SessionKey, int, int]] = []
    for turn_id, agent, user, chat, before, added in rows:
        if turn_id is not None:
            ids.append(turn_id)
        else:
            touched.append((SessionKey(agent, user, chat), before, added))
    return ids, touched


def _store_one(cursor: Any, turn: Values, now: datetime) -> Stored:
    cursor.execute(
        _PG_STORE_ONE_TURN, {**turn._asdict(), "metadata": meta_json(turn.metadata), "now": now}
    )
    one = cursor.fetchone()
    if one is None:  # the turn_key was stored before
        return [], []
    return [one[0]], [(SessionKey(turn.agent_id, turn.user_id, turn.session_id), one[1] - 1, 1)]


def arrays(values: list[Values], now: datetime) -> dict[str, Any]:
    """One list per column, named as the column."""
    columns = dict(zip(Values._fields, map(list, zip(*values, strict=True)), strict=True))
    return {**columns, "metadata": [meta_json(m) for m in columns["metadata"]], "now": now}


def store_sqlite(conn: Connection, values: list[Values], now: datetime) -> Stored:
    """The same in two statements, inside the caller's (write-locked) transaction."""
    turns, sessions = Base.metadata.tables["turns"], Base.metadata.tables["sessions"]
    fixed = {"received_at": now, "status": TurnStatus.PENDING, "attempts": 0}
    inserted = conn.execute(
        sqlite.insert(turns)
        .on_conflict_do_nothing(index_elements=["agent_id", "user_id", "turn_key"])
        .returning(turns.c.id, turns.c.agent_id, turns.c.user_id, turns.c.session_id),
        [{**turn._asdict(), **fixed} for turn in values],
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
