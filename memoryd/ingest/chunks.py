"""Large bulk calls on PostgreSQL: their turns stored in chunks, in session order.

A call of more than CHUNK_TURNS turns is stored in statements of that many, in one
transaction, sent in psycopg's pipeline mode as each chunk is built: the client
validates the next chunk while the server stores the last. The turns go in session
order (stably, so each session's turns keep their order), and each statement inserts
its turns and then bumps, in key order, the sessions whose turns are all in. So every
call locks its sessions in key order, as every writer of several does, and never holds
a session while it inserts that session's turns: a single enqueue holding a key the
call has yet to reach waits for nothing the call holds.

A session cut by a chunk's end is held: the statement leaves it unbumped and counts
its new turns into a setting local to the transaction, which the next statement adds
to the session's count when it bumps it. No statement waits for the client to read
the one before. Bumping every session in one statement after the last chunk left the
server that statement (9 to 11 ms a call of 1,000 sessions) with nothing to overlap;
reading each chunk's count back before sending the next cost imports a fifth of their
rate (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from sqlalchemy.pool import PoolProxiedConnection

from memoryd.ingest.rows import (
    BUMP_SESSIONS,
    BUMPED_ROWS,
    FROM_ARRAYS,
    INSERT_TURNS,
    PG_STORE_ARRAYS,
    Stored,
    Values,
    arrays,
    pg_errors,
    stored_rows,
)

CHUNK_TURNS = 200

SessionOf = tuple[str, str, str]  # agent, user and session, as their text
T = TypeVar("T")


class Chunk(NamedTuple):
    """A chunk's turns, and the session cut by its end, which goes on in the next."""

    values: list[Values]
    cut: SessionOf | None


# The statements holding a cut session alternate between two settings: each reads the
# count the one before wrote, and never what it writes itself. Read only after the
# statement before wrote it: a setting never written fails the call, not its count.
_CARRIED = "CAST(current_setting('memoryd.carried_' || %(read_slot)s) AS int)"
_CUT_KEY = """(CAST(%(cut_agent)s AS text), CAST(%(cut_user)s AS text),
               CAST(%(cut_session)s AS text))"""
# A chunk that continues a session cut by the chunk before, or cuts one.
_PG_STORE_CUT_CHUNK = f"""
WITH new_turns AS ({{insert}}), counted AS (
    SELECT agent_id AS a, user_id AS u, session_id AS c, 1 AS n FROM new_turns
    UNION ALL
    SELECT CAST(%(carried_agent)s AS text), CAST(%(carried_user)s AS text),
           CAST(%(carried_session)s AS text), {_CARRIED}
    WHERE CAST(%(carried_agent)s AS text) IS NOT NULL
), per_session AS (
    SELECT a, u, c, sum(n)::int AS n FROM counted
    WHERE (a, u, c) IS DISTINCT FROM {_CUT_KEY} GROUP BY a, u, c HAVING sum(n) > 0
), cut AS (
    SELECT set_config('memoryd.carried_' || %(write_slot)s, COALESCE(sum(n), 0)::text, true)
    FROM counted WHERE (a, u, c) = {_CUT_KEY}
), bumped AS ({{bump}})
SELECT id, NULL, NULL, NULL, NULL, NULL FROM new_turns
UNION ALL {BUMPED_ROWS}
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL FROM cut AS written (v) WHERE v IS NULL
""".format(
    insert=INSERT_TURNS.format(source=FROM_ARRAYS),
    bump=BUMP_SESSIONS.format(source="per_session"),
)
# A session cut by the last chunk that stored any turn (the chunks after it refused
# every turn), bumped by the count carried for it.
_PG_BUMP_CARRIED = f"""
WITH per_session AS (
    SELECT CAST(%(carried_agent)s AS text) AS a, CAST(%(carried_user)s AS text) AS u,
           CAST(%(carried_session)s AS text) AS c, {_CARRIED} AS n
), bumped AS ({{bump}})
{BUMPED_ROWS}""".format(bump=BUMP_SESSIONS.format(source="per_session WHERE n > 0"))


def in_session_order(
    items: Iterable[T], session: Callable[[T], SessionOf]
) -> Iterator[tuple[list[T], SessionOf | None]]:
    """`items` sorted by session, stably, in chunks of CHUNK_TURNS (the last fewer),
    each with the session its end cuts, if it does."""
    ordered = sorted(items, key=session)
    for start in range(0, len(ordered), CHUNK_TURNS):
        end = start + CHUNK_TURNS
        last = session(ordered[min(end, len(ordered)) - 1])
        cut = end < len(ordered) and session(ordered[end]) == last
        yield ordered[start:end], last if cut else None


def values_session(values: Values) -> SessionOf:
    return values.agent_id, values.user_id, values.session_id


def of_values(values: list[Values]) -> Iterator[Chunk]:
    """Validated turns as store_pg_chunks takes them."""
    return (Chunk(*chunk) for chunk in in_session_order(values, values_session))


def store_pg_chunks(
    pooled: PoolProxiedConnection,
    chunks: Iterable[Chunk],
    now: datetime,
    invalidate: Callable[[BaseException], None],
) -> Stored:
    """Store `chunks` (in_session_order's, their turns validated) in one transaction,
    each sent as soon as `chunks` yields it: a generator that validates each chunk does
    so while the server stores the one before. An error `chunks` raises rolls every
    chunk back."""

    def run() -> Stored:
        conn: Any = pooled.driver_connection
        cursors: list[Any] = []
        carried: SessionOf | None = None  # cut by the last chunk sent
        slot = 0  # the setting the last cut chunk wrote
        with conn.transaction(), conn.pipeline():
            for values, cut in chunks:
                if not values:
                    continue  # nothing to store; a carried count waits for the next
                cursors.append(cursor := conn.cursor())
                if carried is None and cut is None:
                    cursor.execute(PG_STORE_ARRAYS, arrays(values, now))
                    continue
                params = {**arrays(values, now), **_keys(carried, cut), **_slots(slot)}
                cursor.execute(_PG_STORE_CUT_CHUNK, params)
                carried, slot = cut, 1 - slot
            if carried is not None:
                cursors.append(cursor := conn.cursor())
                params = {**_keys(carried, None), **_slots(slot), "now": now}
                cursor.execute(_PG_BUMP_CARRIED, params)
            return stored_rows(row for cursor in cursors for row in cursor.fetchall())

    return pg_errors(run, invalidate)


def _keys(carried: SessionOf | None, cut: SessionOf | None) -> dict[str, str | None]:
    """The session the chunk before cut, whose count is carried, and the one this cuts."""
    names = ("agent", "user", "session")
    return {
        **{f"carried_{name}": carried[i] if carried else None for i, name in enumerate(names)},
        **{f"cut_{name}": cut[i] if cut else None for i, name in enumerate(names)},
    }


def _slots(slot: int) -> dict[str, str]:
    """Read the setting the chunk before wrote, write the other."""
    return {"read_slot": str(slot), "write_slot": str(1 - slot)}
