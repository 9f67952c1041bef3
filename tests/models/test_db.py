"""Transactions as the pipeline needs them: SQLite readers never hold up writers, and a
worker refuses to start on a database it cannot use."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from memoryd.client import MemoryClient
from memoryd.errors import DatabaseUnavailable
from memoryd.memories.transfer import export_memories
from memoryd.models.db import MATH_FUNCTIONS, session_scope
from memoryd.models.migrate import upgrade
from memoryd.settings import Settings
from testkit.databases import scratch_database
from testkit.workers import REPO_ROOT, settings_env


def test_a_long_read_does_not_block_writers(settings: Settings) -> None:
    """An export is open mid-stream while the chat backend keeps saving: on SQLite the
    reader must not hold the database write lock (the writer would wait for its busy
    timeout, 30 s, or fail)."""
    client = MemoryClient(settings, dispatch=False)
    for i in range(3):
        client.remember("bot", "ann", f"Fact number {i}")
    wrote = threading.Event()
    with session_scope(settings.storage, readonly=True) as session:
        lines = export_memories(session)
        assert next(lines)  # the read transaction is open now
        writer = threading.Thread(
            target=lambda: (client.remember("bot", "ann", "Written meanwhile"), wrote.set())
        )
        writer.start()
        writer.join(timeout=10)
        assert wrote.is_set(), "a writer waited for an open read transaction"
        assert len(list(lines)) == 2  # the reader's own snapshot, undisturbed


@pytest.fixture
def unmigrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new database of the test's kind, without memoryd's tables."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/new.db"
        return
    server = request.getfixturevalue("pg_server")
    with scratch_database(server, "memoryd_new", migrate=False) as url:
        yield url


@pytest.mark.parametrize("unmigrated_url", ["sqlite", "postgres"], indirect=True)
def test_a_client_on_a_database_without_tables_says_to_migrate(
    tmp_path: Path, unmigrated_url: str
) -> None:
    """A first call before `memoryd migrate`, through either kind of transaction (the
    ingest path's and the session's), gets one error saying what to run, not the
    driver's traceback about a missing table."""
    settings = Settings(data_dir=tmp_path, database_url=unmigrated_url)
    client = MemoryClient(settings, dispatch=False)
    turn = {"agent_id": "bot", "user_id": "ann", "session_id": "s", "role": "user"}
    for call in (
        lambda: client.enqueue_turn(**turn, content="Call me Ann"),
        lambda: client.recall("what is my name", "bot", "ann"),
    ):
        with pytest.raises(DatabaseUnavailable, match=r"no memoryd tables: run `memoryd migrate`"):
            call()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("database_url", "reason"),
    [
        ("postgresql+psycopg://postgres@127.0.0.1:1/none", "cannot use the database"),
        ("sqlite:///{tmp}/never-migrated.db", "run `memoryd migrate`"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [["memoryd", "worker"], ["celery", "-A", "memoryd.worker", "worker"]],
    ids=["memoryd", "celery"],
)
def test_a_worker_that_cannot_use_its_database_does_not_start(
    tmp_path: Path, database_url: str, reason: str, command: list[str]
) -> None:
    """Started either way the docs give: memoryd's own or Celery's command line."""
    settings = Settings(data_dir=tmp_path, database_url=database_url.format(tmp=tmp_path))
    env = {**settings_env(settings), "MEMORYD_STARTUP_WAIT_SECONDS": "1"}
    out = subprocess.run(
        [sys.executable, "-m", *command, "--pool=solo"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 3
    assert "ready." not in out.stdout + out.stderr  # it never took a task
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("memoryd worker: ") and reason in last


@pytest.mark.parametrize("value", [0.5, 1.0, 2.2, 3.75, 1234.5678, 1e-7, 9.87654321e12])
def test_sqlite_without_math_functions_gets_the_same_ones(value: float) -> None:
    """Recall's BM25 runs ln and floor in SQL; a SQLite built without them gets Python's,
    which must give bit for bit what SQLite's own give, or rankings would differ."""
    builtin = sqlite3.connect(":memory:")
    fallback = sqlite3.connect(":memory:")
    for name, function in MATH_FUNCTIONS.items():  # replaces the built-in, as in such a build
        fallback.create_function(name, 1, function, deterministic=True)
    query = "SELECT ln(?), floor(?), typeof(floor(?))"
    assert (
        fallback.execute(query, [value] * 3).fetchone()
        == builtin.execute(query, [value] * 3).fetchone()
    )


def test_a_statement_or_a_lock_wait_past_its_timeout_fails(
    backend: str, settings: Settings
) -> None:
    """No statement holds a worker and its locks for good (SQLite waits at most its
    busy timeout)."""
    if backend != "postgres":
        pytest.skip("statement_timeout and lock_timeout are PostgreSQL's")
    s = settings.updated(**{"db_statement_timeout_seconds": 0.5, "db_lock_timeout_seconds": 0.3})
    started = time.monotonic()
    with (
        pytest.raises(OperationalError, match="statement timeout"),
        session_scope(s.storage) as session,
    ):
        session.execute(text("SELECT pg_sleep(5)"))
    with session_scope(settings.storage) as holder:
        holder.execute(text("LOCK TABLE turns IN ACCESS EXCLUSIVE MODE"))
        with (
            pytest.raises(OperationalError, match="lock timeout"),
            session_scope(s.storage) as session,
        ):
            session.execute(text("SELECT count(*) FROM turns"))
    assert time.monotonic() - started < 4
    # The migrations' own transaction has no limits, and leaves the pool's as they were.
    upgrade(s)
    with session_scope(s.storage) as session:
        assert session.execute(text("SHOW statement_timeout")).scalar() == "500ms"
