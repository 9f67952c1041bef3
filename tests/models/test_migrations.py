"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

from alembic import command

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
