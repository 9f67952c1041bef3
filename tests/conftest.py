"""Test fixtures on real parts: PostgreSQL and SQLite databases, Redis, worker processes.

Every test that takes `settings` or `db` runs twice: on PostgreSQL (a database of its
own, created for this test run) and on the embedded SQLite default. Tables are emptied
before each test, never mocked.

Environment: MEMORYD_TEST_PG (server URL without database, default
postgresql+psycopg://postgres@127.0.0.1:5432), MEMORYD_TEST_REDIS_DB (default 15).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from memoryd.models.db import dispose_engines, session_factory
from memoryd.models.migrate import upgrade
from memoryd.models.tables import Base
from memoryd.settings import Settings
from tests.fakellm import FakeLLM

PG_SERVER = os.environ.get("MEMORYD_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS_DB = int(os.environ.get("MEMORYD_TEST_REDIS_DB", "15"))
REDIS_URL = f"redis://127.0.0.1:6379/{REDIS_DB}"
BACKENDS = ["postgres", "sqlite"]


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test run, migrated to head, dropped after."""
    name = f"memoryd_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = create_engine(f"{PG_SERVER}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"{PG_SERVER}/{name}"
    upgrade(Settings(database_url=url))
    yield url
    dispose_engines()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def redis_url() -> Iterator[str]:
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


def make_settings(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, **overrides: Any
) -> Settings:
    """Settings for one backend with empty tables. PostgreSQL pairs with Redis; SQLite
    with the filesystem broker in the test's own folder."""
    data_dir = tmp_path / "data"
    if backend == "postgres":
        url = request.getfixturevalue("pg_database")
        _truncate_all(url)
        base: dict[str, Any] = {
            "database_url": url,
            "broker_url": request.getfixturevalue("redis_url"),
        }
    else:
        base = {"database_url": f"sqlite:///{data_dir / 'memoryd.db'}"}
    settings = Settings(data_dir=data_dir, **{**base, **overrides})
    if backend == "sqlite":
        upgrade(settings)
    return settings


def _truncate_all(url: str) -> None:
    engine = create_engine(url)
    names = ", ".join(t.name for t in Base.metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    return make_settings(backend, tmp_path, request)


@pytest.fixture
def db(settings: Settings) -> Iterator[Session]:
    """A session on the test's database; the test commits what it wants others to see."""
    session = session_factory(settings)()
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
    return settings.model_copy(
        update={
            "llm_base_url": llm.base_url,
            "llm_api_key": "test-key",
            "llm_backoff_max_seconds": 0.2,
            "llm_timeout_seconds": 2.0,
            **overrides,
        }
    )
