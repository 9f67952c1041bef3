"""batch totals: what removed batches recorded, so the pipeline's totals never go back

Retention and erasure remove batch rows; their figures are added here first.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "batch_totals",
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("batches", sa.BigInteger(), nullable=False),
        sa.Column("llm_calls", sa.BigInteger(), nullable=False),
        sa.Column("tokens_in", sa.BigInteger(), nullable=False),
        sa.Column("tokens_out", sa.BigInteger(), nullable=False),
        sa.Column("facts_proposed", sa.BigInteger(), nullable=False),
        sa.Column("facts_accepted", sa.BigInteger(), nullable=False),
        sa.Column("rejections", sa.JSON(), nullable=False),
        sa.Column("last_finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("status", name=op.f("pk_batch_totals")),
    )


def downgrade() -> None:
    op.drop_table("batch_totals")
