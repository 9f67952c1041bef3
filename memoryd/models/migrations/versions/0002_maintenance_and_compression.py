"""maintenance and compression

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_segments",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("first_turn_id", sa.BigInteger(), nullable=False),
        sa.Column("last_turn_id", sa.BigInteger(), nullable=False),
        sa.Column("turn_count", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("prompt_version", sa.String(length=50), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_segments")),
    )
    with op.batch_alter_table("session_segments", schema=None) as batch_op:
        batch_op.create_index(
            "ix_session_segments_session",
            ["agent_id", "user_id", "session_id", "first_turn_id"],
            unique=False,
        )

    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("archive_due_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(
            "ix_memories_archive_due",
            ["archive_due_at"],
            unique=False,
            postgresql_where=sa.text("tier = 'long' AND status = 'active'"),
            sqlite_where=sa.text("tier = 'long' AND status = 'active'"),
        )
        batch_op.create_index(
            "ix_memories_expiry_due",
            ["expires_at"],
            unique=False,
            postgresql_where=sa.text("tier = 'short' AND status = 'active'"),
            sqlite_where=sa.text("tier = 'short' AND status = 'active'"),
        )
        batch_op.create_index(
            "ix_memories_promotion_due",
            ["access_count"],
            unique=False,
            postgresql_where=sa.text("tier = 'short' AND status = 'active'"),
            sqlite_where=sa.text("tier = 'short' AND status = 'active'"),
        )

    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("compress_lease_until", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column("compress_attempts", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("compress_error", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("compress_error")
        batch_op.drop_column("compress_attempts")
        batch_op.drop_column("compress_lease_until")

    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_memories_promotion_due",
            postgresql_where=sa.text("tier = 'short' AND status = 'active'"),
            sqlite_where=sa.text("tier = 'short' AND status = 'active'"),
        )
        batch_op.drop_index(
            "ix_memories_expiry_due",
            postgresql_where=sa.text("tier = 'short' AND status = 'active'"),
            sqlite_where=sa.text("tier = 'short' AND status = 'active'"),
        )
        batch_op.drop_index(
            "ix_memories_archive_due",
            postgresql_where=sa.text("tier = 'long' AND status = 'active'"),
            sqlite_where=sa.text("tier = 'long' AND status = 'active'"),
        )
        batch_op.drop_column("archive_due_at")

    with op.batch_alter_table("session_segments", schema=None) as batch_op:
        batch_op.drop_index("ix_session_segments_session")

    op.drop_table("session_segments")
