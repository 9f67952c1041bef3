"""profiles: the user and work documents of every scope, their history, batch counts

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "profiles",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=10), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("field_meta", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profiles")),
        sa.UniqueConstraint("agent_id", "user_id", "type", name="uq_profiles_scope_type"),
    )
    op.create_table(
        "profile_events",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("profile_id", sa.BigInteger(), nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(length=12), nullable=False),
        sa.Column("batch_id", sa.BigInteger(), nullable=True),
        sa.Column("patch", sa.JSON(), nullable=False),
        sa.Column("meta_patch", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["profile_id"],
            ["profiles.id"],
            name=op.f("fk_profile_events_profile_id_profiles"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profile_events")),
    )
    with op.batch_alter_table("profile_events", schema=None) as batch_op:
        batch_op.create_index("ix_profile_events_profile", ["profile_id", "version"], unique=False)
    with op.batch_alter_table("extraction_batches", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("profile_updates", sa.Integer(), server_default="0", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("extraction_batches", schema=None) as batch_op:
        batch_op.drop_column("profile_updates")
    op.drop_table("profile_events")
    op.drop_table("profiles")
