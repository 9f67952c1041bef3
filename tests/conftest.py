"""Test fixtures on real parts: PostgreSQL and SQLite databases, Redis, worker processes.

Every test that takes `settings` or `db` runs twice: on PostgreSQL (a database of its
own, created for this test run) and on the embedded SQLite default. Tables are emptied
before each test, never mocked.

Servers: MEMORYD_TEST_PG (a PostgreSQL server URL without database) and
MEMORYD_TEST_REDIS (a Redis URL without database) when set; else the machine's own on
127.0.0.1:5432 and :6379 when they answer; else throwaway ones started for this run
(testkit/services.py), or a clear message saying what to install. Each xdist worker
claims a Redis database no other run uses meanwhile (redis_db) and flushes it, nothing
else.

RabbitMQ (the tests parametrized with the `rabbitmq` backend: PostgreSQL + RabbitMQ):
MEMORYD_TEST_AMQP_URL (an amqp:// URL without vhost), else 127.0.0.1:5672 as guest,
when it answers; else a private rabbitmq-server started for this run; else those tests
are skipped with the line that installs it. The run uses a vhost of its own, made and
removed through rabbitmqctl or the management API, so runs never see each other's
messages; a broker allowing neither is used in its own vhost, whose memoryd queues each
test empties (concurrent runs on it would then meet).
"""

from __future__ import annotations

import os
import shutil
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import freezegun
import pytest
import redis
from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from memoryd import memo
from memoryd.models.db import READONLY, dispose_engines, get_engine
from memoryd.models.migrate import upgrade
from memoryd.models.tables import Base
from memoryd.recall import embeddings
from memoryd.settings import Settings
from testkit.databases import scratch_database
from testkit.fakellm import FakeLLM
from testkit.services import (
    PgBouncer,
    PostgresCluster,
    RabbitMQServer,
    RedisServer,
    ServiceUnavailable,
    VirtualHosts,
    amqp_reachable,
    port_open,
    purge_queues,
)

# freeze_time looks through every loaded module for clocks to replace. Once the local
# embedding model is loaded that is some 6,000 modules more (a second per call, half a
# minute the first time); none of them reads the time the tests freeze.
freezegun.configure(
    extend_ignore_list=[
        "torch",
        "torchgen",
        "transformers",
        "sentence_transformers",
        "huggingface_hub",
        "tokenizers",
        "safetensors",
        "scipy",
        "sklearn",
        "sympy",
        "mpmath",
        "narwhals",
        "joblib",
        "rich",
    ]
)
XDIST_INDEX = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
# Redis databases a test run may claim for itself, one per xdist worker (0 is where the
# claims are kept; the benches use 4).
REDIS_DBS = [n for n in range(15, 0, -1) if n != 4]
REDIS_CLAIM_SECONDS = 4 * 3600  # a claim a killed run left behind lapses after this
BACKENDS = ["postgres", "sqlite"]
LOCAL_AMQP = "amqp://guest:guest@127.0.0.1:5672"


BROWSER_FIXTURES = {"browser"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the browser tests, and start the longest tests first, one per xdist worker."""
    for item in items:
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
    items[:] = longest_first(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def longest_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The `long` tests first, longest first, so none starts last and ends the run alone.
    `make test` runs xdist with --maxschedchunk 1, which hands each worker two tests to
    begin with and then one at a time: each long test is followed by a short one, so the
    first tests of each worker are one long and one short."""
    long = sorted((i for i in items if expected_seconds(i)), key=expected_seconds, reverse=True)
    short = [i for i in items if not expected_seconds(i)]
    if workers < 2:
        return long + short
    pairs = min(workers, len(long), len(short))
    paired = [test for pair in zip(long[:pairs], short[:pairs], strict=True) for test in pair]
    return paired + long[pairs:] + short[pairs:]


def expected_seconds(item: pytest.Item) -> float:
    """What a `long` test's marker says it takes; the rest count as short (0)."""
    marker = item.get_closest_marker("long")
    return float(marker.kwargs.get("seconds", 60)) if marker else 0.0


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a PostgreSQL server (no database): configured, local, or started here."""
    if url := os.environ.get("MEMORYD_TEST_PG"):
        yield url
    elif port_open("127.0.0.1", 5432):
        yield "postgresql+psycopg://postgres@127.0.0.1:5432"
    else:
        cluster = _started(lambda: PostgresCluster().start())
        yield cluster.server_url
        cluster.remove()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a Redis server (no database number): configured, local, or started here."""
    if url := os.environ.get("MEMORYD_TEST_REDIS"):
        yield url.rstrip("/")
    elif port_open("127.0.0.1", 6379):
        yield "redis://127.0.0.1:6379"
    else:
        server = _started(lambda: RedisServer(tmp_path_factory.mktemp("redis")).start())
        yield server.url
        server.stop()


@pytest.fixture(scope="session")
def amqp_server() -> Iterator[str]:
    """URL of a RabbitMQ vhost of this run's own: on the configured or local broker when
    it answers, else on a private one started here; skipped when neither can be had."""
    configured = os.environ.get("MEMORYD_TEST_AMQP_URL", "").rstrip("/")
    server: RabbitMQServer | None = None
    if amqp_reachable(configured or LOCAL_AMQP):
        base = configured or LOCAL_AMQP
        hosts = VirtualHosts(base)
    else:
        try:
            server = RabbitMQServer().start()
        except ServiceUnavailable as exc:
            pytest.skip(str(exc))
        base = server.url
        hosts = VirtualHosts(base, ctl=server.ctl)
    vhost = hosts.add(f"memoryd_test_{os.getpid()}_{uuid.uuid4().hex[:6]}")
    yield f"{base}/{vhost}" if vhost else base
    if vhost:
        hosts.delete(vhost)
    if server is not None:
        server.remove()


@pytest.fixture
def amqp_url(amqp_server: str) -> str:
    """The run's RabbitMQ vhost, memoryd's queues empty."""
    purge_queues(amqp_server)
    return amqp_server


T = TypeVar("T")


def _started(start: Callable[[], T]) -> T:
    try:
        return start()
    except ServiceUnavailable as exc:
        pytest.exit(f"memoryd tests need it: {exc}", returncode=4)


@pytest.fixture(scope="session")
def pg_database(pg_server: str) -> Iterator[str]:
    """A fresh PostgreSQL database for this test run, migrated to head, dropped after."""
    with scratch_database(pg_server, f"memoryd_test_{os.getpid()}") as url:
        yield url
        if cleaner := _cleaners.pop(url, None):
            cleaner.dispose()


@pytest.fixture
def pooler(pg_server: str) -> Iterator[PgBouncer]:
    """A transaction-pooling PgBouncer of the test's own in front of the test PostgreSQL:
    what one test leaves on its server connections meets no other test."""
    server = make_url(pg_server)
    bouncer = _started(lambda: PgBouncer((server.host or "127.0.0.1", server.port or 5432)).start())
    yield bouncer
    dispose_engines()
    bouncer.stop()


def through(pooler: PgBouncer, settings: Settings, **overrides: Any) -> Settings:
    """`settings`' PostgreSQL database, reached through the pooler."""
    database = make_url(settings.storage.resolved_database_url).database
    url = f"{pooler.server_url()}/{database}"
    return settings.updated(**{"database_url": url, **overrides})


@pytest.fixture(scope="session")
def redis_db(redis_server: str) -> Iterator[int]:
    """The Redis database this run (this xdist worker) flushes, used by no other run on
    the server meanwhile: a second suite or a bench run beside this one would otherwise
    flush the extract triggers this one's workers wait for. MEMORYD_TEST_REDIS_DB (minus
    the xdist worker's index) names one instead."""
    if configured := os.environ.get("MEMORYD_TEST_REDIS_DB"):
        yield int(configured) - XDIST_INDEX
        return
    claims = redis.Redis.from_url(f"{redis_server}/0")
    owner = f"{socket.gethostname()}:{os.getpid()}"
    for db in REDIS_DBS:
        key = f"memoryd-test:claimed-db:{db}"
        if claims.set(key, owner, nx=True, ex=REDIS_CLAIM_SECONDS) or _left_behind(claims, key):
            claims.set(key, owner, ex=REDIS_CLAIM_SECONDS)
            yield db
            if claims.get(key) == owner.encode():
                claims.delete(key)
            claims.close()
            return
    pytest.exit(f"every Redis database of {redis_server} is claimed by another test run", 4)


def _left_behind(claims: redis.Redis, key: str) -> bool:
    """Whether the claim was made by a process of this machine that is gone."""
    host, _, pid = (claims.get(key) or b"").decode().partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def redis_url(redis_server: str, redis_db: int) -> Iterator[str]:
    url = f"{redis_server}/{redis_db}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


def make_settings(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, **overrides: Any
) -> Settings:
    """Settings for one backend with empty tables. PostgreSQL pairs with Redis; SQLite
    with the filesystem broker in the test's own folder; `rabbitmq` is PostgreSQL with
    RabbitMQ."""
    data_dir = tmp_path / "data"
    if backend in ("postgres", "rabbitmq"):
        url = request.getfixturevalue("pg_database")
        empty_tables(url)
        # Ids start again at 1 under the same URL: what this process cached of an earlier
        # test's rows (scope vectors, query vectors, statistics) must not meet these.
        embeddings.clear_caches()
        memo.clear_all()
        base: dict[str, Any] = {
            "database_url": url,
            "broker_url": request.getfixturevalue(
                "amqp_url" if backend == "rabbitmq" else "redis_url"
            ),
        }
    else:
        data_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(request.getfixturevalue("sqlite_template"), data_dir / "memoryd.db")
        base = {"database_url": f"sqlite:///{data_dir / 'memoryd.db'}"}
    return Settings(data_dir=data_dir, **{**base, **overrides})


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated to head once per run (and xdist worker): each test
    starts from a copy of it, as `memoryd migrate` would have left it."""
    folder = tmp_path_factory.mktemp("sqlite-template")
    settings = Settings(data_dir=folder, database_url=f"sqlite:///{folder / 'memoryd.db'}")
    upgrade(settings)
    get_engine(settings.storage).dispose()  # the last connection closed moves the WAL into the file
    path = folder / "memoryd.db"
    assert not path.with_name("memoryd.db-wal").exists()
    return path


_cleaners: dict[str, Engine] = {}
TABLES = [t.name for t in Base.metadata.sorted_tables]
# The tables holding rows; most tests write a few of them, and TRUNCATE costs per table.
USED_TABLES = text(
    " UNION ALL ".join(f"SELECT '{name}' WHERE EXISTS (SELECT 1 FROM {name})" for name in TABLES)
)
ADVANCED_SEQUENCES = text(
    "SELECT schemaname || '.' || sequencename FROM pg_sequences WHERE last_value IS NOT NULL"
)


def empty_tables(url: str) -> None:
    """Empty every table of a PostgreSQL database of the run, ids restarting at 1 (also
    of tables a test emptied itself), on a connection kept for the run."""
    engine = _cleaners.get(url)
    if engine is None:
        engine = _cleaners[url] = create_engine(url, poolclass=StaticPool)
    with engine.begin() as conn:
        if used := conn.execute(USED_TABLES).scalars().all():
            conn.execute(text(f"TRUNCATE {', '.join(used)} RESTART IDENTITY CASCADE"))
        for sequence in conn.execute(ADVANCED_SEQUENCES).scalars().all():
            conn.execute(text(f"ALTER SEQUENCE {sequence} RESTART"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    return make_settings(backend, tmp_path, request)


@pytest.fixture
def db(settings: Settings) -> Iterator[Session]:
    """A session on the test's database. On SQLite it begins DEFERRED like a reader, so
    looking at results never blocks the code under test; a test that writes through it
    commits what it wants others to see."""
    engine = get_engine(settings.storage).execution_options(**{READONLY: True})
    session = sessionmaker(engine, expire_on_commit=False)()
    try:
        yield session
    finally:
        session.rollback()
        session.close()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A real OpenAI-protocol HTTP server on loopback, scripted by the test."""
    with FakeLLM() as llm:
        yield llm


def with_llm(settings: Settings, llm: FakeLLM, **overrides: Any) -> Settings:
    """Point settings at the fake LLM, with fast retries so fault tests stay quick."""
    return settings.updated(
        **{
            "llm_base_url": llm.base_url,
            "llm_api_key": "test-key",
            "llm_backoff_max_seconds": 0.2,
            "llm_timeout_seconds": 2.0,
            **overrides,
        }
    )
