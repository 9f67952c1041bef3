"""time: when a memory's source was said and when an episode happened; injection rules

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memoryd.models import search_index

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable and without a default: adding them rewrites no row on either database.
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("said_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=True))
    # Per-agent overrides of seed 003 §3.3's injection rules (NULL: the default).
    with op.batch_alter_table("agent_settings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("inject_first_round_empty", sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column("inject_min_query_length", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("inject_long_term_triggers", sa.JSON(none_as_null=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("agent_settings", schema=None) as batch_op:
        batch_op.drop_column("inject_long_term_triggers")
        batch_op.drop_column("inject_min_query_length")
        batch_op.drop_column("inject_first_round_empty")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("occurred_at")
        batch_op.drop_column("said_at")
    # SQLite rebuilt the memories table to drop the columns, and its triggers with it.
    search_index.install(op.get_bind(), lengths=False)
