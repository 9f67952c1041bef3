"""Engines (SQLite configured with the math functions its queries need) and the one
transaction helper: pipeline functions flush, `session_scope` commits. The database
clock and the locks are coordination.py's."""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, func, make_url, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import PoolProxiedConnection

from memoryd.errors import DatabaseUnavailable
from memoryd.settings import StorageSettings, masked_url

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_JOURNAL_LIMIT = 64 * 1024 * 1024  # bytes a checkpointed WAL is truncated to

_engines: dict[tuple[str, bool, float, float, int, int, bool], Engine] = {}
_engines_lock = threading.Lock()


def utcnow() -> datetime:
    return datetime.now(UTC)


READONLY = "memoryd_readonly"  # execution option of read-only sessions


def _configure_sqlite(engine: Engine) -> None:
    """WAL + busy timeout; write transactions BEGIN IMMEDIATE, read-only ones DEFERRED.

    pysqlite starts transactions lazily as DEFERRED; a reader that later writes then
    fails at once with "database is locked" because SQLite cannot wait on a lock
    upgrade. Taking the write lock at BEGIN makes writers queue on the busy timeout
    instead. Sessions opened with `readonly=True` never write, so they begin DEFERRED
    and, under WAL, neither wait for writers nor block them (a long export included).
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        # Erased and purged text is overwritten, not only unlinked from the b-tree (some
        # builds default to it, others not); the WAL is kept from growing without end.
        cur.execute("PRAGMA secure_delete=ON")
        cur.execute(f"PRAGMA journal_size_limit={SQLITE_JOURNAL_LIMIT}")
        cur.close()
        _ensure_math_functions(dbapi_conn)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        readonly = conn.get_execution_options().get(READONLY, False)
        conn.exec_driver_sql("BEGIN DEFERRED" if readonly else "BEGIN IMMEDIATE")


# Python's stand-ins for SQLite's math functions, where a build lacks them (below).
MATH_FUNCTIONS = {"ln": math.log, "floor": lambda x: float(math.floor(x))}


def _ensure_math_functions(dbapi_conn: Any) -> None:
    """Recall's BM25 runs ln and floor in SQL (recall/bm25.py). SQLite builds without
    its math functions get them from Python, which calls the same C library."""
    try:
        dbapi_conn.execute("SELECT ln(1.0), floor(1.5)")
    except sqlite3.OperationalError:
        for name, function in MATH_FUNCTIONS.items():
            dbapi_conn.create_function(name, 1, function, deterministic=True)


def _create_private(path: str | None) -> None:
    """Create a new SQLite file readable by its owner alone (0600): it holds what users
    said. SQLite gives its -wal and -shm files the database file's mode."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    # Only a file that does not exist yet is opened: closing any descriptor of a file
    # drops every POSIX lock this process holds on it, SQLite's own included.
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def checkpoint_sqlite(settings: StorageSettings) -> None:
    """After an erasure or a purge on SQLite: copy the WAL into the database file and
    truncate it, so the deleted rows' old pages (which the WAL holds whole) leave the
    disk; secure_delete has zeroed them in the database file. A reader in another
    process can hold the checkpoint back: then the next one finishes it."""
    if not settings.resolved_database_url.startswith("sqlite"):
        return
    connection = get_engine(settings).raw_connection()
    try:  # a raw connection: a checkpoint cannot run inside the BEGIN a session opens
        cursor = connection.cursor()
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy = cursor.fetchone()
        cursor.close()
    finally:
        connection.close()
    if busy and busy[0]:
        log.info("the WAL checkpoint after an erasure waits for a reader; the next one ends it")


def make_engine(
    url: str,
    autocommit: bool = False,
    statement_timeout: float = 0,
    lock_timeout: float = 0,
    pool: tuple[int, int] = (10, 20),
    pooler: bool = False,
) -> Engine:
    """An engine for `url`. On PostgreSQL every connection gets the timeouts (seconds,
    0: none): a statement running longer, or waiting longer for a lock, fails instead of
    holding its worker and its locks; `pool` is (connections kept, more when busy).
    `pooler`: the URL is a transaction-pooling PgBouncer (see _behind_pooler)."""
    if url.startswith("sqlite"):
        _create_private(make_url(url).database)
        engine = create_engine(
            url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, hide_parameters=True
        )
        _configure_sqlite(engine)
        return engine
    # No pre-ping: it costs a round trip on every checkout of the ingest hot path. A
    # connection broken by a server restart fails one call, and SQLAlchemy then
    # invalidates the whole pool; recycling bounds the age of idle connections.
    engine = create_engine(
        url,
        pool_size=pool[0],
        max_overflow=pool[1],
        pool_recycle=1800,
        isolation_level="AUTOCOMMIT" if autocommit else "READ COMMITTED",
        # An error's text never carries a statement's parameters: they hold what users said.
        hide_parameters=True,
        # Behind a pooler each transaction may run on another server connection, which
        # knows none of this one's prepared statements.
        connect_args={"prepare_threshold": None} if pooler else {},
    )
    timeouts = (int(statement_timeout * 1000), int(lock_timeout * 1000))
    if pooler:
        _behind_pooler(engine, autocommit, timeouts)
        return engine

    @event.listens_for(engine, "connect")
    def _set_timeouts(dbapi_conn: Any, _record: Any) -> None:
        with dbapi_conn.cursor() as cur:
            cur.execute(f"SET statement_timeout = {timeouts[0]}")
            cur.execute(f"SET lock_timeout = {timeouts[1]}")
        dbapi_conn.commit()

    return engine


def _behind_pooler(engine: Engine, autocommit: bool, timeouts: tuple[int, int]) -> None:
    """A transaction-pooling PgBouncer hands each transaction whichever server connection
    is free, so a setting made on a connection would stay behind on a server connection
    other clients then get: the timeouts are set in each transaction instead (one round
    trip more per transaction). Single statements in autocommit (the ingest path) run
    with the database role's own timeouts: set them there too (docs/deployment.md)."""
    if autocommit:
        return
    statement = (
        f"SELECT set_config('statement_timeout', '{timeouts[0]}', true), "
        f"set_config('lock_timeout', '{timeouts[1]}', true)"
    )

    @event.listens_for(engine, "begin")
    def _set_local_timeouts(conn: Connection) -> None:
        conn.exec_driver_sql(statement)


def get_engine(settings: StorageSettings, autocommit: bool = False) -> Engine:
    """One engine per database URL per process (workers call `dispose_engines` after fork).

    `autocommit` engines serve single-statement writes (ingest on PostgreSQL): one round
    trip instead of BEGIN, statement, COMMIT. SQLite always gets the transactional engine.
    """
    url = settings.resolved_database_url
    autocommit = autocommit and not url.startswith("sqlite")
    timeouts = (settings.db_statement_timeout_seconds, settings.db_lock_timeout_seconds)
    pool = (settings.db_pool_size, settings.db_max_overflow)
    pooler = settings.db_transaction_pooler
    key = (url, autocommit, *timeouts, *pool, pooler)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            if url.startswith("sqlite"):
                settings.ensure_private_folder(settings.data_dir)
            engine = _engines[key] = make_engine(url, autocommit, *timeouts, pool, pooler)
        return engine


def dispose_engines() -> None:
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose(close=False)
        _engines.clear()
        _factories.clear()


_factories: dict[tuple[str, bool, bool, float, float, int, int, bool], sessionmaker[Session]] = {}


def session_factory(
    settings: StorageSettings, readonly: bool = False, autocommit: bool = False
) -> sessionmaker[Session]:
    timeouts = (settings.db_statement_timeout_seconds, settings.db_lock_timeout_seconds)
    pool = (settings.db_pool_size, settings.db_max_overflow)
    pooler = settings.db_transaction_pooler
    url = settings.resolved_database_url
    key = (url, readonly, autocommit, *timeouts, *pool, pooler)  # as get_engine's
    factory = _factories.get(key)  # dispose_engines() empties this with the engines
    if factory is None:
        engine = get_engine(settings, autocommit=autocommit)
        bind = engine
        if readonly:
            # One snapshot for the whole read (an export streamed in chunks stays
            # consistent); on SQLite, WAL gives the same to a DEFERRED transaction.
            # Read-only and autocommit on PostgreSQL: a snapshot per statement, for a
            # read that is one statement (no BEGIN and COMMIT round trips).
            options: dict[str, Any] = {READONLY: True}
            if engine.dialect.name == "postgresql" and not autocommit:
                options |= {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
            bind = engine.execution_options(**options)
        factory = _factories[key] = sessionmaker(bind, expire_on_commit=False)
    return factory


@contextmanager
def session_scope(
    settings: StorageSettings, *, readonly: bool = False, autocommit: bool = False
) -> Iterator[Session]:
    """Open a session, commit on success, roll back on error. `readonly` sessions must not
    write; they read one consistent snapshot and never hold up writers (on SQLite they do
    not take the database write lock). `autocommit` sessions, on PostgreSQL, run each
    statement as its own transaction, without BEGIN and COMMIT round trips: for work
    whose every write is one statement (recall); on SQLite they are ordinary ones. Both
    at once: a read of one statement, whose snapshot is that statement's (on PostgreSQL
    nothing refuses a write there, and each would commit alone: write elsewhere)."""
    session = session_factory(settings, readonly, autocommit)()
    try:
        yield session
        session.commit()
    except BaseException as exc:
        session.rollback()
        _raise_if_not_migrated(exc, settings)
        raise
    finally:
        session.close()


@contextmanager
def write_connection(settings: StorageSettings) -> Iterator[Connection | PoolProxiedConnection]:
    """A connection for the ingest hot path, without the ORM session's bookkeeping.

    On PostgreSQL it is the pool's own driver connection, in autocommit: each statement
    is its own transaction, so a single statement is a single round trip, and SQLAlchemy's
    Connection, its BEGIN and COMMIT (no-ops in autocommit) cost 0.025-0.03 ms a call on a
    2-core machine. On SQLite it is one BEGIN IMMEDIATE transaction committed on
    success.
    """
    engine = get_engine(settings, autocommit=True)
    try:
        if engine.dialect.name == "sqlite":
            with engine.begin() as conn:
                yield conn
        else:
            pooled = _checkout(engine)
            try:
                yield pooled
            finally:
                pooled.close()  # back to the pool (or gone, if invalidated)
    except BaseException as exc:
        _raise_if_not_migrated(exc, settings)
        raise


def _checkout(engine: Engine) -> PoolProxiedConnection:
    """The pool's connection, failing as a Connection would have: with SQLAlchemy's
    error (the server answers its OperationalError with 503), not the driver's."""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        return engine.raw_connection()
    except dbapi_error as error:
        raise DBAPIError.instance(None, None, error, dbapi_error, dialect=engine.dialect) from error


def describe_db_error(exc: BaseException, settings: StorageSettings) -> str:
    """One line for a person: which database, and what went wrong with it."""
    url = masked_url(settings.resolved_database_url)  # in its query string too
    first = _first_line(exc)
    if _names_missing_table(first):
        return f"the database at {url} has no memoryd tables: run `memoryd migrate` ({first})"
    return f"cannot use the database at {url}: {first}"


def _first_line(exc: BaseException) -> str:
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return reason[0] if reason else type(exc).__name__


def _names_missing_table(line: str) -> bool:
    return ("does not exist" in line and "relation" in line) or "no such table" in line


def _raise_if_not_migrated(exc: BaseException, settings: StorageSettings) -> None:
    """A database without memoryd's tables (a new SQLite file, say): one error saying to
    run `memoryd migrate`, not the driver's traceback."""
    if isinstance(exc, DBAPIError) and _names_missing_table(_first_line(exc)):
        raise DatabaseUnavailable(describe_db_error(exc, settings)) from exc


def rowcount(result: Any) -> int:
    """Rows matched by an UPDATE/DELETE (typed access to CursorResult.rowcount)."""
    return int(result.rowcount)


def is_sqlite(session: Session) -> bool:
    return session.get_bind().dialect.name == "sqlite"


# A list's total stops counting here past the rows before the page shown: "1,000+".
# Counting every row of a 50,000-memory scope to print one number would cost as much
# as the page itself many times over.
COUNT_CAP = 1000


def capped_count(session: Session, stmt: Any, cap: int) -> int:
    """How many rows `stmt` (a select) yields, stopping at `cap`: the database reads at
    most `cap` rows of it (a LIMIT inside the count), whatever the table holds."""
    first = stmt.order_by(None).limit(cap).subquery()
    return int(session.scalar(select(func.count()).select_from(first)) or 0)
