"""memories.description dropped: nothing ever wrote or read it

Dropped in place (PostgreSQL; SQLite 3.35 and later), without copying the table, which
would take its search and tally triggers with it. An older SQLite keeps the column: it
is nullable and no statement names it.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28
"""

import sqlite3
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite" and sqlite3.sqlite_version_info < (3, 35):
        return
    op.execute("ALTER TABLE memories DROP COLUMN description")


def downgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("memories")}
    if "description" not in columns:
        op.execute("ALTER TABLE memories ADD COLUMN description TEXT")
