"""memory tallies: whole-store memory figures from changes, not a pass over the memories

Triggers on memories append a row per change of a memory's status, tier, category or
confidence; the maintenance cycle folds them. Started here from the memories stored.
The conflicts list and its count read superseded memories through an index of their own.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memoryd.models import tallies

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "memory_tallies",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("tier", sa.String(length=10), nullable=False),
        sa.Column("category", sa.String(length=20), nullable=False),
        sa.Column("memories", sa.BigInteger(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_tallies")),
    )
    tallies.install(op.get_bind())
    op.create_index(
        "ix_memories_superseded",
        "memories",
        ["id"],
        postgresql_where=sa.text("status = 'superseded'"),
        sqlite_where=sa.text("status = 'superseded'"),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_superseded", table_name="memories")
    tallies.uninstall(op.get_bind())
    op.drop_table("memory_tallies")
