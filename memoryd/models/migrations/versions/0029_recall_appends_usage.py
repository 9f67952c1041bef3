"""recall writes nothing but its usage rows: memory_usage.folded

A recall appends one usage row per memory it returned and changes no memory; maintenance
folds the rows not yet folded into their memories' weight and access columns. Rows
recorded before this revision were applied when they were written: they start folded.

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNFOLDED = "NOT folded"


def upgrade() -> None:
    with op.batch_alter_table("memory_usage") as batch:
        batch.add_column(
            sa.Column("folded", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    with op.batch_alter_table("memory_usage") as batch:
        batch.alter_column("folded", server_default=sa.false())
    op.create_index(
        "ix_memory_usage_unfolded",
        "memory_usage",
        ["id"],
        postgresql_where=sa.text(UNFOLDED),
        sqlite_where=sa.text(UNFOLDED),
    )


def downgrade() -> None:
    op.drop_index("ix_memory_usage_unfolded", table_name="memory_usage")
    with op.batch_alter_table("memory_usage") as batch:
        batch.drop_column("folded")
