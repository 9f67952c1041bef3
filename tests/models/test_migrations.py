"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

from alembic import command
from sqlalchemy import text

from memoryd.client import MemoryClient
from memoryd.models.db import get_engine
from memoryd.models.migrate import alembic_config
from memoryd.settings import Settings


def test_models_and_migrations_agree(settings: Settings) -> None:
    command.check(alembic_config(settings))  # raises if autogenerate would change anything


def test_downgrade_and_upgrade_again(tmp_path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'm.db'}", data_dir=tmp_path)
    command.upgrade(alembic_config(settings), "head")
    command.downgrade(alembic_config(settings), "base")
    command.upgrade(alembic_config(settings), "head")
    command.check(alembic_config(settings))


def test_the_search_triggers_survive_every_step(tmp_path) -> None:
    """SQLite rebuilds a table to drop a column, and its triggers go with it: every
    migration that rebuilds memories re-installs them."""
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'm.db'}", data_dir=tmp_path)
    command.upgrade(alembic_config(settings), "head")
    MemoryClient(settings, dispatch=False).remember("bot", "ann", "Prefers green tea")
    command.downgrade(alembic_config(settings), "0008")
    with get_engine(settings).begin() as conn:
        triggers = conn.scalars(
            text("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
        ).all()
        assert triggers == [
            "memories_search_delete",
            "memories_search_insert",
            "memories_search_update",
        ]
        conn.execute(text("UPDATE memories SET search_text = 'oolong', name = 'oolong'"))
        assert conn.scalars(text("SELECT term FROM memory_terms")).all() == ["oolong"]
    command.upgrade(alembic_config(settings), "head")
    assert MemoryClient(settings, dispatch=False).recall("oolong", "bot", "ann")
