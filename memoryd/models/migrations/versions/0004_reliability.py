"""reliability: leases checked per claimed turn, back-off, circuit breaker, batch flags

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        # Never read: a claimed turn's liveness is its session's lease.
        batch_op.drop_column("lease_until")
        batch_op.add_column(
            sa.Column("lost_leases", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.create_index(
            "ix_turns_claimed",
            ["agent_id", "user_id", "session_id"],
            unique=False,
            postgresql_where=sa.text("status = 'claimed'"),
            sqlite_where=sa.text("status = 'claimed'"),
        )

    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("transient_failures", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("compress_batch_id", sa.BigInteger(), nullable=True))
        batch_op.create_index(
            "ix_sessions_lease",
            ["lease_until"],
            unique=False,
            postgresql_where=sa.text("lease_until IS NOT NULL"),
            sqlite_where=sa.text("lease_until IS NOT NULL"),
        )

    with op.batch_alter_table("extraction_batches", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("truncated_turns", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("error_kind", sa.String(length=12), nullable=True))

    op.create_table(
        "circuits",
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("open_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_circuits")),
    )


def downgrade() -> None:
    op.drop_table("circuits")
    with op.batch_alter_table("extraction_batches", schema=None) as batch_op:
        batch_op.drop_column("error_kind")
        batch_op.drop_column("truncated_turns")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_lease")
        batch_op.drop_column("compress_batch_id")
        batch_op.drop_column("transient_failures")
        batch_op.drop_column("retry_at")
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_index("ix_turns_claimed")
        batch_op.drop_column("lost_leases")
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
