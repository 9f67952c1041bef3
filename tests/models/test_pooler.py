"""memoryd behind a transaction-pooling PgBouncer (`MEMORYD_DB_TRANSACTION_POOLER`): each
transaction may run on another server connection, and a server connection serves many
clients in turn. Debian's PgBouncer, started by the tests with three server
connections, in front of the test PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import DBAPIError

from memoryd.client import MemoryClient
from memoryd.ingest.chunks import CHUNK_TURNS
from memoryd.models.coordination import LOCK_CLASS_EMBEDDING, single_flight
from memoryd.models.db import get_engine
from memoryd.settings import Settings
from testkit.services import PgBouncer
from tests.conftest import make_settings, through
from tests.factories import turn_item

THREADS = 8
ROUNDS = 20  # each statement runs far more often than psycopg's prepare threshold (5)


@pytest.fixture
def direct(tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    """The test database, reached directly, its tables empty."""
    return make_settings("postgres", tmp_path, request)


def run_in_threads(work: Callable[[int], None]) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def clients_at_work(settings: Settings) -> Callable[[int], None]:
    """Each thread saves, recalls and lists in its own scope, many times over: every
    statement runs often enough for the driver to prepare it, were it allowed to."""

    def work(i: int) -> None:
        client = MemoryClient(settings, dispatch=False)
        for n in range(ROUNDS):
            client.remember("bot", f"user-{i}", f"Learnt the word {chr(97 + n)}{chr(97 + i)}lorbex")
            client.recall(f"which word did thread {i} learn", "bot", f"user-{i}", k=3)
        assert len(client.list("bot", f"user-{i}")) == ROUNDS

    return work


def test_many_clients_share_three_server_connections(pooler: PgBouncer, direct: Settings) -> None:
    pooled = through(pooler, direct, db_transaction_pooler=True)
    assert run_in_threads(clients_at_work(pooled)) == []
    assert MemoryClient(direct, dispatch=False).health().active == THREADS * ROUNDS


def test_large_bulk_calls_share_three_server_connections(
    pooler: PgBouncer, direct: Settings
) -> None:
    """A large bulk call is stored in chunks, pipelined in one transaction: through the
    pooler, from many threads, each call more often than the prepare threshold."""
    pooled = through(pooler, direct, db_transaction_pooler=True)
    size = 2 * CHUNK_TURNS + 1

    def work(i: int) -> None:
        client = MemoryClient(pooled, dispatch=False)
        for n in range(6):
            items = [turn_item(k, user_id=f"user-{i}", session_id=f"s{k % 3}") for k in range(size)]
            assert client.enqueue_turns(items).accepted == size, n

    assert run_in_threads(work) == []
    with get_engine(direct.storage).connect() as conn:
        stored = conn.execute(text("SELECT count(*) FROM turns")).scalar()
    assert stored == THREADS * 6 * size


@pytest.mark.parametrize("pooler_setting", [True, False])
def test_two_clients_taking_turns_on_one_statement(
    pooler: PgBouncer, direct: Settings, pooler_setting: bool
) -> None:
    """Two connections run one statement in turn, a transaction each, more often than the
    driver's prepare threshold: the pooler gives them the same server connections. With
    the setting nothing is prepared; without it, a statement one prepared is missing
    (or already there) for the other: the fault the setting exists for."""
    engine = get_engine(through(pooler, direct, db_transaction_pooler=pooler_setting).storage)
    counted = text("SELECT count(*) FROM memories WHERE id > :n")
    conns = [engine.connect() for _ in range(2)]
    failed: list[str] = []
    try:
        for n in range(12):
            conn = conns[n % 2]
            try:
                conn.execute(counted, {"n": n}).scalar()
                conn.commit()
            except DBAPIError as exc:
                failed.append(str(exc.orig))
                conn.rollback()
    finally:
        for conn in conns:
            conn.close()
    if pooler_setting:
        assert failed == []
    else:
        assert failed and all("prepared statement" in f for f in failed)


def test_timeouts_hold_in_each_transaction_and_stay_there(
    pooler: PgBouncer, direct: Settings
) -> None:
    """The lock timeout is set in every transaction behind the pooler (a change that
    waits on a held row gives up after it), and never left on the server connection for
    the next client."""
    pooled = through(pooler, direct, db_transaction_pooler=True, db_lock_timeout_seconds=0.3)
    saved = MemoryClient(direct, dispatch=False).remember("bot", "ann", "Prefers tea")
    holder = create_engine(direct.storage.resolved_database_url)
    try:
        with holder.begin() as conn:
            conn.execute(
                text("SELECT id FROM memories WHERE id = :id FOR UPDATE"), {"id": saved.id}
            )
            with pytest.raises(DBAPIError, match="lock timeout"):
                MemoryClient(pooled, dispatch=False).forget("bot", "ann", saved.id)
    finally:
        holder.dispose()
    bare = create_engine(
        f"{pooler.server_url()}/{make_url(direct.storage.resolved_database_url).database}"
    )
    try:
        for _ in range(pooler.server_connections * 2):  # every server connection in turn
            with bare.connect() as conn:
                assert conn.execute(text("SHOW lock_timeout")).scalar() == "0"
    finally:
        bare.dispose()


def test_one_holder_of_a_single_flight_lock_behind_the_pooler(
    pooler: PgBouncer, direct: Settings
) -> None:
    """Work that must not run twice at once (an embedding fill) is still exclusive,
    and free again once its holder is done."""
    pooled = through(pooler, direct, db_transaction_pooler=True)
    with single_flight(pooled.storage, LOCK_CLASS_EMBEDDING, "scope") as first:
        assert first
        with single_flight(pooled.storage, LOCK_CLASS_EMBEDDING, "scope") as second:
            assert not second
    with single_flight(pooled.storage, LOCK_CLASS_EMBEDDING, "scope") as again:
        assert again
