"""Run Alembic migrations programmatically (`memoryd migrate`), no alembic.ini needed."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from memoryd.models.db import get_engine
from memoryd.settings import Settings

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(settings: Settings) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", settings.resolved_database_url.replace("%", "%%"))
    cfg.attributes["settings"] = settings
    return cfg


def upgrade(settings: Settings, revision: str = "head") -> None:
    get_engine(settings)  # creates the SQLite data directory if needed
    command.upgrade(alembic_config(settings), revision)
