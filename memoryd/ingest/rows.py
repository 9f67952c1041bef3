"""Writing turns and their sessions' counters, one way per database: the ingest hot path.

`store` takes the rows buffer.store_turns built and returns the new turn ids and, per
touched session, (key, pending before, added), through the database's own way
(store_pg, store_sqlite).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, exc
from sqlalchemy.dialects import sqlite

from memoryd.models.keys import SessionKey
from memoryd.models.tables import Base

# PostgreSQL: turns and their session's counters in ONE statement, so an enqueue on an
# autocommit connection is a single round trip. Arrays carry any number of turns.
# sessions.pending_count only decides when to send a trigger; the sweeper reads the
# turns themselves, so the counter can never strand a turn. Both statements run on the
# psycopg cursor itself (plain %(name)s placeholders): SQLAlchemy's compile and result
# layers cost more than the round trip, and psycopg prepares repeated statements.
_PG_STORE_TURNS = """
WITH new_turns AS (
    INSERT INTO turns (turn_key, agent_id, user_id, session_id, role, content, metadata,
                       created_at, received_at, status, attempts, token_count)
    SELECT k, a, u, s, r, c, m::json, t, %(now)s, 'pending', 0, n
    FROM {source}
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
_FROM_ARRAYS = """unnest(CAST(%(keys)s AS text[]), CAST(%(agents)s AS text[]),
                CAST(%(users)s AS text[]), CAST(%(sessions)s AS text[]),
                CAST(%(roles)s AS text[]), CAST(%(contents)s AS text[]),
                CAST(%(metas)s AS text[]), CAST(%(times)s AS timestamptz[]),
                CAST(%(tokens)s AS int[]))
         AS x(k, a, u, s, r, c, m, t, n)"""
_PG_STORE_ARRAYS = _PG_STORE_TURNS.format(source=_FROM_ARRAYS)

# From COPY_FROM turns on, a call streams them with COPY into a table of this
# transaction and inserts from there: packing thousands of values into array
# parameters costs more than the insert itself. Ids follow the order given.
COPY_FROM = 200
_CREATE_INCOMING = """
CREATE TEMPORARY TABLE IF NOT EXISTS memoryd_incoming (
    o int, k text, a text, u text, s text, r text, c text, m text, t timestamptz, n int
) ON COMMIT DELETE ROWS
"""
_COPY_INCOMING = "COPY memoryd_incoming (o, k, a, u, s, r, c, m, t, n) FROM STDIN"
_PG_STORE_INCOMING = _PG_STORE_TURNS.format(source="(SELECT * FROM memoryd_incoming ORDER BY o) x")

# The same for one turn with scalar parameters: no array encoding and no unnest, the
# common case of a chat backend storing each message as it arrives. No row back means
# the turn_key was a duplicate.
_PG_STORE_ONE_TURN = """
WITH new_turn AS (
    INSERT INTO turns (turn_key, agent_id, user_id, session_id, role, content, metadata,
                       created_at, received_at, status, attempts, token_count)
    VALUES (%(key)s, %(agent)s, %(user)s, %(session)s, %(role)s, %(content)s,
            CAST(%(meta)s AS json), %(time)s, %(now)s, 'pending', 0, %(tokens)s)
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
    conn: Connection, rows: list[dict[str, Any]], now: datetime
) -> tuple[list[int], list[tuple[SessionKey, int, int]]]:
    """Store the turns and bump their sessions' counters, the way this database does it
    fastest."""
    chosen = store_sqlite if conn.dialect.name == "sqlite" else store_pg
    return chosen(conn, rows, now)


def meta_json(meta: dict[str, Any] | None) -> str | None:
    return None if meta is None else json.dumps(meta)


def store_pg(
    conn: Connection, rows: list[dict[str, Any]], now: datetime
) -> tuple[list[int], list[tuple[SessionKey, int, int]]]:
    """Returns the new turn ids and, per touched session, (key, pending before, added)."""
    import psycopg  # loaded with the PostgreSQL engine anyway; SQLite users skip it

    psycopg_conn: Any = conn.connection.driver_connection
    try:
        return _run_pg_store(psycopg_conn, rows, now)
    except (psycopg.DataError, psycopg.IntegrityError) as error:
        # The cursor is psycopg's own: report it as SQLAlchemy would have.
        wrapped = exc.DataError if isinstance(error, psycopg.DataError) else exc.IntegrityError
        raise wrapped("INSERT INTO turns", None, error) from error
    except (psycopg.OperationalError, psycopg.InterfaceError) as error:
        # The server went away (a restart): SQLAlchemy did not see this error, so tell its
        # pool, or the dead connection would be handed out again on every later call.
        conn.invalidate(error)
        raise exc.OperationalError("INSERT INTO turns", None, error) from error


def _run_pg_store(
    psycopg_conn: Any, rows: list[dict[str, Any]], now: datetime
) -> tuple[list[int], list[tuple[SessionKey, int, int]]]:
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
                    "meta": meta_json(r["metadata"]),
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
        if len(rows) >= COPY_FROM:
            with psycopg_conn.transaction():  # the autocommit connection's; drops the table
                _copy_incoming(cursor, rows)
                cursor.execute(_PG_STORE_INCOMING, {"now": now})
        else:
            cursor.execute(_PG_STORE_ARRAYS, _arrays(rows, now))
        ids: list[int] = []
        touched: list[tuple[SessionKey, int, int]] = []
        for turn_id, agent, user, chat, before, added in cursor.fetchall():
            if turn_id is not None:
                ids.append(turn_id)
            else:
                touched.append((SessionKey(agent, user, chat), before, added))
        return ids, touched


def _arrays(rows: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    return {
        "keys": [r["turn_key"] for r in rows],
        "agents": [r["agent_id"] for r in rows],
        "users": [r["user_id"] for r in rows],
        "sessions": [r["session_id"] for r in rows],
        "roles": [r["role"] for r in rows],
        "contents": [r["content"] for r in rows],
        "metas": [meta_json(r["metadata"]) for r in rows],
        "times": [r["created_at"] for r in rows],
        "tokens": [r["token_count"] for r in rows],
        "now": now,
    }


def _copy_incoming(cursor: Any, rows: list[dict[str, Any]]) -> None:
    """Stream the rows into this transaction's memoryd_incoming table."""
    cursor.execute(_CREATE_INCOMING)
    with cursor.copy(_COPY_INCOMING) as copy:
        for order, r in enumerate(rows):
            copy.write_row((
                order, r["turn_key"], r["agent_id"], r["user_id"], r["session_id"], r["role"],
                r["content"], meta_json(r["metadata"]), r["created_at"], r["token_count"],
            ))  # fmt: skip


def store_sqlite(
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
