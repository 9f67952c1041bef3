"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

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


def test_the_upgrade_gives_existing_postings_their_memorys_length(settings: Settings) -> None:
    """0012 moves each memory's length into its postings, where BM25 reads it."""
    config = alembic_config(settings)
    # Saved before the downgrade: the models describe head, not 0011.
    MemoryClient(settings, dispatch=False).remember("bot", "ann", "Prefers green tea, hot")
    command.downgrade(config, "0011")
    with pytest.raises(DBAPIError, match="search_length"), get_engine(settings).begin() as conn:
        conn.execute(text("SELECT search_length FROM memory_terms"))  # left with 0012
    command.upgrade(config, "head")
    with get_engine(settings).begin() as conn:
        lengths = conn.execute(
            text(
                "SELECT t.term, t.search_length, m.search_length FROM memory_terms AS t "
                "JOIN memories AS m ON m.id = t.memory_id ORDER BY t.term"
            )
        ).all()
    assert [tuple(row) for row in lengths] == [
        ("green", 8, 8),  # name and content: the text twice
        ("hot", 8, 8),
        ("prefer", 8, 8),
        ("tea", 8, 8),
    ]
