"""Migrations (`memoryd migrate`, no alembic.ini needed) and the readiness check that
keeps a worker from starting on a database it cannot use."""

from __future__ import annotations

import time
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.exc import SQLAlchemyError

from memoryd.errors import DatabaseUnavailable
from memoryd.models.db import describe_db_error, get_engine
from memoryd.settings import Settings, StorageSettings

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(settings: Settings) -> Config:
    """The migrations' configuration; they are handed the whole settings (one reads
    the compression trigger)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    url = settings.storage.resolved_database_url
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["settings"] = settings
    return cfg


def upgrade(settings: Settings, revision: str = "head", wait_seconds: float = 0.0) -> None:
    """Migrate to `revision`, waiting up to `wait_seconds` for the server to come up."""
    _wait_for_server(settings.storage, wait_seconds)
    command.upgrade(alembic_config(settings), revision)


def check_ready(settings: Settings, wait_seconds: float = 0.0) -> None:
    """Raise DatabaseUnavailable (one clear line) unless the database answers, within
    `wait_seconds`, and is migrated to the version this code needs."""
    _wait_for_server(settings.storage, wait_seconds)
    head = ScriptDirectory.from_config(alembic_config(settings)).get_current_head()
    with get_engine(settings.storage).connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current != head:
        raise DatabaseUnavailable(
            f"the database is at schema {current or 'none'}, this memoryd needs {head}: "
            "run `memoryd migrate`"
        )


def _wait_for_server(settings: StorageSettings, wait_seconds: float) -> None:
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            with get_engine(settings).connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            return
        except SQLAlchemyError as exc:
            if time.monotonic() >= deadline:
                raise DatabaseUnavailable(describe_db_error(exc, settings)) from None
            time.sleep(1.0)
