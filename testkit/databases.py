"""Scratch PostgreSQL databases for tests and benches: created, used, dropped."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text

from memoryd.models.db import dispose_engines


@contextmanager
def scratch_database(server_url: str, prefix: str, migrate: bool = True) -> Iterator[str]:
    """A new database on the server at `server_url` (migrated to head unless `migrate`
    is false), dropped afterwards whatever happens, its connections closed first."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{server_url}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"{server_url}/{name}"
    try:
        if migrate:
            from memoryd.models.migrate import upgrade
            from memoryd.settings import Settings

            upgrade(Settings(database_url=url))
        yield url
    finally:
        dispose_engines()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
