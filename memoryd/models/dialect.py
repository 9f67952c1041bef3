"""The differences between SQLite and PostgreSQL that the stages meet, one function per
concern, so no stage asks which database it runs on: row locks, upserts, the larger of
two values, one writer at a time, planner statistics. (Many rows written at once:
models/bulk.py; the turn insert: ingest/rows.py; search statements: recall/search.py,
recall/bm25.py and recall/trigrams.py; recall's usage append: recall/usage.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Select, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.sql.functions import Function

from memoryd.models.db import is_sqlite

SelectT = TypeVar("SelectT", bound=Select)  # type: ignore[type-arg]


def for_update(
    session: Session, stmt: SelectT, *, skip_locked: bool = False, keys_kept: bool = False
) -> SelectT:
    """`stmt` locking the rows it reads until the transaction ends; with `skip_locked`,
    rows another transaction holds are left out instead of waited for. With
    `keys_kept`, for a change of other columns than keys: the lock (FOR NO KEY UPDATE)
    leaves rows inserted meanwhile free to reference these ones (a foreign key's check
    takes KEY SHARE, which FOR UPDATE would block). SQLite: the write transaction
    already holds the database lock."""
    if is_sqlite(session):
        return stmt
    return stmt.with_for_update(skip_locked=skip_locked, key_share=keys_kept)


def upsert(session: Session) -> Callable[..., Any]:
    """The dialect's `insert`, which has ON CONFLICT (on_conflict_do_nothing/_update)."""
    return sqlite.insert if is_sqlite(session) else postgresql.insert


def greatest(session: Session, *values: Any) -> Function[Any]:
    """The larger of `values` in SQL (SQLite's max of several arguments)."""
    return func.max(*values) if is_sqlite(session) else func.greatest(*values)


def locks_rows(session: Session) -> bool:
    """Whether locks are taken row by row (PostgreSQL); SQLite's write transaction holds
    the whole database, so there is no row to lock first."""
    return not is_sqlite(session)


def one_writer_at_a_time(session: Session) -> bool:
    """Whether a write transaction holds the whole database (SQLite): long work done in
    chunks pauses between them, so that other writers get their turn."""
    return is_sqlite(session)


def keeps_planner_statistics(session: Session) -> bool:
    """Whether the planner works from statistics that ANALYZE refreshes (PostgreSQL;
    memoryd's SQLite statements do not depend on them)."""
    return not is_sqlite(session)
