"""How processes agree: the database server's clock, by which leases and turn
timestamps are judged whatever a worker's own clock says, and the locks that keep two
writers of one scope, or two runs of one job, apart (advisory locks on PostgreSQL, the
write lock or a process lock on SQLite)."""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from memoryd.models.db import get_engine, is_sqlite, utcnow
from memoryd.models.keys import Scope
from memoryd.settings import StorageSettings


def lock_scope(session: Session, scope: Scope) -> None:
    """Serialise writers of one scope's memories until the transaction ends: extraction,
    direct edits, imports and tools alike, so none of them can race another into two
    copies of one fact.

    PostgreSQL: a transaction-level advisory lock keyed by the scope. SQLite: the
    transaction already holds the database write lock (BEGIN IMMEDIATE).
    """
    if is_sqlite(session):
        return
    advisory_xact_lock(session, LOCK_CLASS_SCOPE, f"{scope.agent_id}\x00{scope.user_id}")


def database_time(session: Session) -> datetime:
    """The clock every lease is read and written with: the database server's, so workers
    whose own clocks disagree still agree on who holds a lease. SQLite lives on one
    machine, whose clock every process shares."""
    if is_sqlite(session):
        return utcnow()
    now: datetime = session.execute(text("SELECT statement_timestamp()")).scalar_one()
    return now


def database_now(settings: StorageSettings) -> datetime:
    """The database server's clock, by which ingest bounds turn timestamps: every writer
    is judged by the same clock, whatever its own says. SQLite's is this machine's."""
    engine = get_engine(settings, autocommit=True)
    if engine.dialect.name == "sqlite":
        return utcnow()
    with engine.connect() as conn:
        now: datetime = conn.execute(text("SELECT statement_timestamp()")).scalar_one()
    return now


LOCK_CLASS_SCOPE = 1
LOCK_CLASS_MAINTENANCE = 2
LOCK_CLASS_EMBEDDING = 3
_local_locks: dict[tuple[int, str], threading.Lock] = defaultdict(threading.Lock)


@contextmanager
def single_flight(settings: StorageSettings, lock_class: int, name: str) -> Iterator[bool]:
    """Whether this is the only holder of (class, name) for the block, without waiting:
    work that needs no transaction (a model call) and must not run twice at once.
    PostgreSQL: a session-level advisory lock on a connection of its own in autocommit,
    so no transaction stays open, released at the end (or when the process dies).
    SQLite: one holder per process."""
    engine = get_engine(settings, autocommit=True)
    if engine.dialect.name == "sqlite":
        local = _local_locks[(lock_class, name)]
        got = local.acquire(blocking=False)
        try:
            yield got
        finally:
            if got:
                local.release()
        return
    key = {"c": lock_class, "k": zlib.crc32(name.encode()) - 2**31}
    if settings.db_transaction_pooler:
        # A pooler may run the unlock on another server connection than the lock: the
        # lock is the transaction's instead, held open for the block (pinning one server
        # connection meanwhile), and ends with it: rolled back, so a server that dropped
        # the idle transaction (idle_in_transaction_session_timeout) fails nothing here.
        with get_engine(settings).connect() as conn:
            lock = text("SELECT pg_try_advisory_xact_lock(:c, :k)")
            try:
                yield bool(conn.execute(lock, key).scalar())
            finally:
                with contextlib.suppress(DBAPIError):
                    conn.rollback()
        return
    with engine.connect() as conn:
        got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:c, :k)"), key).scalar())
        try:
            yield got
        finally:
            if got:
                conn.execute(text("SELECT pg_advisory_unlock(:c, :k)"), key)


def advisory_xact_lock(session: Session, lock_class: int, name: str, wait: bool = True) -> bool:
    """PostgreSQL transaction-level advisory lock on (class, name); True on SQLite."""
    if is_sqlite(session):
        return True
    key = zlib.crc32(name.encode()) - 2**31
    fn = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
    got = session.execute(text(f"SELECT {fn}(:c, :k)"), {"c": lock_class, "k": key}).scalar()
    return wait or bool(got)
