"""Ingest through a PostgreSQL restart: the call that meets the dead connection fails (the
caller retries, with turn keys), and the next one stores again, on a new connection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from memoryd.client import MemoryClient
from memoryd.ingest.chunks import CHUNK_TURNS
from memoryd.models.db import dispose_engines
from memoryd.models.migrate import upgrade
from memoryd.settings import Settings
from testkit.services import PostgresCluster
from tests.factories import turn_item

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster().start()
    yield cluster
    dispose_engines()
    cluster.remove()


# One turn a call, and calls stored in chunks in one pipelined transaction.
@pytest.mark.parametrize("size", [1, 2 * CHUNK_TURNS + 1])
def test_ingest_recovers_after_the_server_restarts(
    cluster: PostgresCluster, tmp_path, size: int
) -> None:
    admin = create_engine(f"{cluster.server_url}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("CREATE DATABASE memoryd"))
    admin.dispose()
    settings = Settings(database_url=f"{cluster.server_url}/memoryd", data_dir=tmp_path)
    upgrade(settings)
    client = MemoryClient(settings, dispatch=False)

    def call(i: int) -> list[dict[str, str]]:
        return [turn_item(i, turn_key=f"k{i}-{n}") for n in range(size)]

    assert client.enqueue_turns(call(1)).accepted == size  # pooled now
    cluster.restart("immediate")
    outcomes = []
    for i in range(2, 5):
        try:
            outcomes.append(client.enqueue_turns(call(i)).accepted)
        except OperationalError:
            outcomes.append("failed")
    assert outcomes[-2:] == [size, size]  # at most the first call after the restart fails
    stored = 4 * size if outcomes[0] == size else 3 * size
    engine = create_engine(settings.storage.resolved_database_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM turns")).scalar() == stored
    engine.dispose()


def test_a_server_that_cannot_be_reached_fails_the_call_with_sqlalchemys_error(
    tmp_path,
) -> None:
    """Opening a connection fails as executing on one does: with SQLAlchemy's
    OperationalError, which the HTTP server answers with 503, not the driver's own."""
    down = Settings(
        database_url="postgresql+psycopg://postgres@127.0.0.1:9/memoryd", data_dir=tmp_path
    )
    client = MemoryClient(down, dispatch=False)
    for call in (
        lambda: client.enqueue_turn(turn_item(0)),
        lambda: client.enqueue_turns([turn_item(1)] * 2),
    ):
        with pytest.raises(OperationalError, match="connection"):
            call()
    dispose_engines()
